// The node side of one run's round protocol (DESIGN.md, docs/protocol.md) as a session: a state
// machine with one handler per message, driven by its caller. The caller computes; the session
// speaks the protocol (Join and rejoin, round starts, the exchange placement's inputs, the signed
// record, decisions, state transfers, forwarded evidence). Node::run (runtime/roles.h) drives it
// with the C++ worker; the simulator runs Node::run on threads; Python drives it as
// ballot.session (python/src/bind_session.cc, over runtime::open_cluster_node).
//
//   session.start();                                   // Join
//   while (true) {
//     auto event = session.poll();                     // or next_round() / await_decision(),
//                                                      // or poll_for(wait): nullopt when idle
//     kCompute:  compute event.work's partitions on the replica, then submit_vote /
//                submit_gradient / submit_partition_signs (exactly one, for event.work.round)
//     kDecided:  the session applied the decision of round event.round − 1 to the replica
//     kStateInstalled: a state transfer replaced the replica's model (round event.round)
//     kFinished, kCrashed: the run is over for this node
//   }
//
// The replica is the caller's and the session's: the session reads its digest, applies decisions
// to it and installs transferred states; the caller computes on it between kCompute and submit.
// Byzantine behaviour enters at one seam, NodeAdversary: consulted when a message is about to be
// built and sent, never inside the honest path. Not thread-safe: one caller thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/bit_vector.h"
#include "core/result.h"
#include "runtime/quarantine.h"
#include "runtime/replica.h"
#include "runtime/session_clock.h"
#include "runtime/training.h"
#include "transport/transport.h"

namespace ballot::coding {
class Codec;
}

namespace ballot::runtime {

inline constexpr transport::NodeId kServerId = 0;
inline transport::NodeId node_id(std::size_t node_index) { return static_cast<transport::NodeId>(node_index + 1); }

// What the caller computes for a round.
struct RoundWork {
  enum class Kind {
    kVote,            // the sign path's vote over its row of G: submit_vote
    kGradient,        // the gradient path: submit_gradient (the session encodes it)
    kPartitionSigns,  // exchange placement: its own partition's signs, submit_partition_signs
  };
  Kind kind = Kind::kVote;
  std::uint64_t round = 0;
  std::uint32_t deadline_ms = 0;
  transport::Digest model_digest{};       // the server's state digest of the model it is computed on
  std::vector<std::uint32_t> partitions;  // the batches to compute (TrainingSetup::sampler)
};

struct NodeEvent {
  enum class Kind { kCompute, kDecided, kStateInstalled, kFinished, kCrashed };
  Kind kind = Kind::kFinished;
  std::uint64_t round = 0;  // the round the replica is in after the event (kCompute: the work's)
  bool moved = false;       // kStateInstalled: the node was in another round before
  RoundWork work;           // kCompute
};

// What a Byzantine node sends instead of the honest message (runtime/node_attacks.h has the one
// of the run's attack spec). Every hook has the honest default.
class NodeAdversary {
 public:
  // What a hook may do with the network: seal a payload, send a sealed frame.
  class Link {
   public:
    virtual ~Link() = default;
    virtual transport::OutboundFrame seal(transport::MessageType type, std::uint64_t round,
                                          std::vector<std::uint8_t> payload) = 0;
    virtual Status send(transport::NodeId to, transport::OutboundFrame frame) = 0;  // peer failures tolerated
    virtual void sleep_for(std::chrono::milliseconds duration) = 0;                 // on the session's clock
  };
  // A message's content before it is encoded: signs or gradient, with or without the digest.
  struct Content {
    std::uint64_t round = 0;
    transport::Digest* model_digest = nullptr;  // the digest the message claims
    BitVector* signs = nullptr;                 // a vote (either placement)
    std::vector<float>* gradient = nullptr;     // the gradient path's gradient, before the codec
  };
  enum class Silence { kNone, kRound, kForever };

  virtual ~NodeAdversary() = default;
  // Whether the node ignores the messages of `round` (a crash); kForever ends its run.
  virtual Silence silence(std::uint64_t /*round*/) { return Silence::kNone; }
  // Replaces the content of the node's vote (`type` kVote) before it is encoded; on the gradient
  // path it is called twice, with the gradient before the codec and with the digest after it.
  virtual void replace(transport::MessageType /*type*/, Content /*content*/) {}
  // Sends the sealed honest frame of `type` (kVote, kPartitionSigns) for `round` to `receivers`,
  // or what the node sends instead. The honest message `payload` is there to be altered. Returns
  // whether the honest message went out (false: withheld; an own exchange input is then dropped).
  virtual Result<bool> deliver(transport::MessageType type, std::uint64_t round, std::uint32_t deadline_ms,
                               const std::vector<std::uint8_t>& payload, transport::OutboundFrame honest,
                               const std::vector<transport::NodeId>& receivers, Link& link);
};

struct NodeSessionOptions {
  std::chrono::milliseconds idle_timeout{300000};  // nothing from the server this long: kTimeout
  std::chrono::milliseconds join_retry{1000};      // re-send Join while no round has started
  // Exchange placement: the share of the round deadline to wait for the inputs of its row.
  double exchange_input_fraction = 0.5;
  std::shared_ptr<Quarantine> evidence;      // proofs to forward to the server (may be null)
  std::shared_ptr<NodeAdversary> adversary;  // null: honest
  // The signed record (runtime/signed_record.h): its file (empty: in memory), the registry to
  // check it against (null: unchecked) and how many rounds it keeps.
  std::filesystem::path record_path;
  std::shared_ptr<const transport::Registry> registry;
  std::uint64_t record_rounds = 164;
  std::shared_ptr<SessionClock> clock;  // null: the steady clock (runtime/session_clock.h)
  // The server relays its decisions through the voters (ServerSessionOptions::relay_decisions):
  // a start of the next round, or Finish, that comes while this round's decision is due waits
  // for its pieces, then for the decision asked for whole, before the node rejoins as one that is
  // behind. Pieces are taken either way; without this a node one round behind rejoins at once.
  bool relayed_decisions = false;
};

struct NodeSessionStats {
  std::uint64_t rounds = 0;  // decisions applied
  std::uint64_t votes_sent = 0;
  std::uint64_t inputs_missing = 0;   // exchange: inputs of its row that abstained
  std::uint64_t inputs_rejected = 0;  // exchange: inputs not counted
  std::uint64_t rejoins = 0;          // state transfers installed
  // Of which of the node's own round with another state than its own: its parameters differed
  // from the server's (changed outside the decisions, or a step that is not deterministic).
  std::uint64_t resynchronised = 0;
  std::uint64_t abstained = 0;            // messages not sent: another was signed for that round
  std::uint64_t send_failures = 0;        // sends to an unreachable peer (skipped)
  std::uint64_t pieces_relayed = 0;       // decision pieces from the server handed on to the others
  std::uint64_t pieces_rejected = 0;      // relayed pieces without a valid server signature
  std::uint64_t decisions_requested = 0;  // pieces missing: the decision asked for whole
};

class NodeSession {
 public:
  NodeSession(const TrainingSetup& setup, std::size_t node_index, transport::Transport& transport, Replica& replica,
              NodeSessionOptions options = {});
  ~NodeSession();
  NodeSession(const NodeSession&) = delete;
  NodeSession& operator=(const NodeSession&) = delete;

  // Opens the signed record and sends the first Join.
  Status start();
  // Handles messages until the next event. kTimeout after idle_timeout without the server.
  Result<NodeEvent> poll();
  // The same, but returns nullopt once `max_wait` passed without an event (0: handle what has
  // arrived, wait for nothing).
  Result<std::optional<NodeEvent>> poll_for(std::chrono::milliseconds max_wait);
  // poll() until work to compute (kCompute) or the end (kFinished, kCrashed); the kDecided and
  // kStateInstalled events on the way pass unseen (a caller with per-round state uses poll()).
  Result<NodeEvent> next_round();
  // poll() until the decision of the submitted round is applied (kDecided), or the round was
  // overtaken (kStateInstalled, kCompute of another round, kFinished, kCrashed).
  Result<NodeEvent> await_decision();

  // The computed message of the round of the last kCompute event, of that work's kind (another
  // kind: kInvalidArgument). A round overtaken meanwhile (decided, state transferred) sends nothing.
  Status submit_vote(double loss, BitVector signs);
  // The gradient is read during the call only: encoded in place, or first copied for an adversary
  // to replace (its view of the round may compute on the buffer the span points into).
  Status submit_gradient(double loss, std::span<const float> gradient);
  Status submit_partition_signs(double loss, BitVector signs);
  // The gradient path's message as the caller encoded it: codec()'s bytes for the model's layout,
  // written from codec()'s state with the random stream codec_rng(setup, round, index) (ballot.torch
  // on a GPU: coding/cuda writes what codec()->encode would, and only those bytes reach the host).
  // An honest node's: with an adversary (whose attacks act on the gradient) it is kInvalidArgument,
  // as is a size the codec cannot write; nothing is sent then and the round stays open.
  Status submit_encoded(double loss, std::vector<std::uint8_t> bytes);
  // The round's vote in `count` pieces as the caller computes it (replicated placement, sign path,
  // no adversary): piece `index` holds the packed signs' words [W·index/count, W·(index+1)/count)
  // of W = ⌈d/64⌉ (messages.h vote_piece_word), 1 ≤ count ≤ max(1, W). Each piece is signed and
  // sent at once; every piece goes out once, all with the loss and count of the first. The server
  // counts the vote once all pieces arrived. A caller that stops part-way (a non-finite gradient)
  // has not voted. kInvalidArgument, nothing sent, for a piece that breaks these rules.
  Status submit_vote_piece(double loss, std::uint32_t index, std::uint32_t count, std::span<const std::uint64_t> words);

  // Whether a submission now would be sent: the last kCompute's round is open, not overtaken (a
  // caller with costly or stateful work to submit, such as a GPU encode, asks first).
  bool round_open() const noexcept;
  std::uint64_t round() const noexcept;  // the next round the replica will apply
  const NodeSessionStats& stats() const noexcept;
  coding::Codec* codec() noexcept;  // the gradient path's codec (its error-feedback memory); else null
  // Global top-k (gtopk): the last decision's global set, the coordinates it changed, as the
  // aggregator's global message (coding/global_topk.h global_set_of); empty before the first
  // decision and for other codecs; valid until the next decision. codec()'s last selection took it
  // when the decision was applied; a caller that wrote the round's message itself (submit_encoded)
  // hands it to its own encoder's accept_global after kDecided.
  std::span<const std::uint8_t> global_set() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ballot::runtime
