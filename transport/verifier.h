// The receiving side of signed envelopes: authenticity against the pinned registry, freshness
// (current round only, no sequence twice) and equivocation detection.
//
// Order of checks (cheap and stateless first; state changes only for authentic frames):
//   1. sender is registered with this role, and equals the authenticated peer when one is given;
//   2. job id; the role may send this type (round starts and results only from the server,
//      gradients and votes only from nodes);
//   3. the Ed25519 signature over the header; 4. payload_digest(payload) (the SHA-256 tree of
//      transport/crypto.h) equals the signed digest;
//   5. round in [current, current + rounds_ahead]; 6. sequence not yet seen for (sender, round)
//      (a 64-wide sliding window, as in IPsec, so reordering within 64 is tolerated);
//   7. for one-per-round types, a different digest than the first accepted one is equivocation.
// A frame that fails any check is rejected with the Misbehaviour that names why; an equivocating
// frame also yields a self-contained EquivocationProof.
//
// Memory: O(registered senders × (rounds_ahead + 1) × message types), bounded by the registry.
// Thread-safety: verify() and set_round() may be called concurrently (one internal mutex, held
// only for the state checks, never during signature verification or hashing).
#pragma once

#include <bitset>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include "core/result.h"
#include "transport/envelope.h"
#include "transport/identity.h"
#include "transport/misbehaviour.h"

namespace ballot::transport {

struct VerifierOptions {
  std::uint64_t job = 0;
  // Signatures verified before by another receiver in this process (null: each is verified).
  std::shared_ptr<SignatureCache> signature_cache;
  std::uint64_t rounds_ahead = 1;  // accept round r+1 while at r (a RoundStart may beat set_round)
  // Types not bound to a round (session set-up, state transfer, control): a peer that restarted
  // or fell behind does not know the current round, so their round is not checked; replays are
  // still caught by one sequence window per sender shared by all of them.
  std::bitset<kMessageTypeCount> round_free = (1u << static_cast<unsigned>(MessageType::kHello)) |
                                              (1u << static_cast<unsigned>(MessageType::kStateTransfer)) |
                                              (1u << static_cast<unsigned>(MessageType::kControl));
  // Types of which a sender sends one payload per round (one_payload_per_round, envelope.h); a
  // second, different one is equivocation.
  std::bitset<kMessageTypeCount> one_per_round = [] {
    std::bitset<kMessageTypeCount> types;
    for (std::size_t t = 0; t < kMessageTypeCount; ++t) types[t] = one_payload_per_round(static_cast<MessageType>(t));
    return types;
  }();
};

struct Verdict {
  Status status;                                      // ok, or why the frame was rejected
  Misbehaviour kind = Misbehaviour::kMalformedFrame;  // meaningful only when !status.ok()
  std::optional<EquivocationProof> proof;             // set for kEquivocation

  bool ok() const noexcept { return status.ok(); }
};

// Is `role` allowed to send `type`? (Hello, control and relayed decision pieces: everyone.)
bool role_may_send(Role role, MessageType type) noexcept;

class Verifier {
 public:
  Verifier(Registry registry, VerifierOptions options = {});

  // Checks 1-4 only: no round, sequence or equivocation state (used for the session's Hello).
  Verdict verify_authentic(const SignedEnvelope& envelope, ByteSpan payload,
                           std::optional<NodeId> authenticated_peer) const;
  // All checks; on success records the sequence (and digest) so a replay is caught.
  Verdict verify(const SignedEnvelope& envelope, ByteSpan payload, std::optional<NodeId> authenticated_peer);

  // The same two, with check 4 against `computed` = payload_digest(payload) that the caller
  // already computed (the TLS session hashes the payload while it arrives, in cache). The
  // caller vouches that `computed` is the digest of exactly `payload`.
  Verdict verify_authentic(const SignedEnvelope& envelope, ByteSpan payload, const Digest& computed,
                           std::optional<NodeId> authenticated_peer) const;
  Verdict verify(const SignedEnvelope& envelope, ByteSpan payload, const Digest& computed,
                 std::optional<NodeId> authenticated_peer);

  // Moves the accepted window to [round, round + rounds_ahead] and forgets older state.
  // Rounds only move forward; a smaller value is ignored.
  void set_round(std::uint64_t round);
  // Moves the window to [round, round + rounds_ahead] even backwards and forgets the state of
  // round-bound messages. Only after a state transfer from the (trusted) server, e.g. when the
  // server resumed from an older checkpoint than this node's round.
  void reset_round(std::uint64_t round);
  std::uint64_t round() const;
  // Forgets `sender`'s sequence windows (not its first digests: equivocation is still caught).
  // When a new authenticated session of `sender` begins: sequence numbers start at the sending
  // process's clock, so a restarted process, or one whose clock is behind another process that
  // held the same id, would otherwise have every frame rejected as a replay. Replay across
  // sessions needs the sender's own key (mutual TLS), so the window only ever guarded one session.
  void forget_sequences(NodeId sender);

  const Registry& registry() const noexcept { return registry_; }
  const VerifierOptions& options() const noexcept { return options_; }

 private:
  Verdict check_authentic(const SignedEnvelope& envelope, ByteSpan payload, const Digest* computed,
                          std::optional<NodeId> authenticated_peer) const;
  Verdict check_fresh(const SignedEnvelope& envelope);
  struct Window {
    std::uint64_t highest = 0;
    std::uint64_t seen = 0;  // bit i: highest - i was accepted
    bool any = false;
  };
  const Registry registry_;
  const VerifierOptions options_;
  mutable std::mutex mutex_;  // guards the members below; never held while calling out
  std::uint64_t round_ = 0;
  // (sender, round); the round-free types share the key (sender, kRoundFreeKey).
  static constexpr std::uint64_t kRoundFreeKey = ~std::uint64_t{0};
  std::map<std::pair<NodeId, std::uint64_t>, Window> windows_;                      // (sender, round)
  std::map<std::tuple<NodeId, std::uint64_t, MessageType>, SignedEnvelope> first_;  // (sender, round, type)
};

}  // namespace ballot::transport
