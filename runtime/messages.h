// Payloads of the round protocol (DESIGN.md), carried in signed envelopes (transport/): the
// envelope already binds job, sender, role, type and round, so payloads hold only what is new.
// All little-endian with fixed-width fields; decoders take peer bytes, check every length against
// the expected dimension before allocating, and return kMalformed naming the field.
//
//   RoundStart  (server → nodes, kRoundStart)  round u64 | deadline_ms u32 | state digest [32]
//   Vote        (node → server, kVote)         round u64 | loss f64 | state digest [32] |
//                                              dimension u64 | packed signs (⌈d/64⌉ words)
//   Decision    (server → nodes, kDecision)    round u64 | η f32 | λ f32 | full digest u8 |
//                                              dimension u64 | packed signs
//               (η, λ: the round's learning rate and weight decay as the update applies them;
//               every replica applies these bits, none recomputes a schedule; full digest 1: the
//               next state digest is the parameters', 0: the chain — the server's digest_every)
// Exchange placement (DESIGN.md step 2; docs/protocol.md):
//   PartitionSigns (node j → the nodes of column j of G, kPartitionSigns): the Vote layout, with
//               the loss of partition j's batch and the signs of partition j (encode/decode_vote)
//   AuditedVote (node → server, kVote)         the Vote layout | count u32 |
//                                              count × the inputs' signed envelope metadata
//                                              (transport/envelope.h, 136 bytes each), authors
//                                              strictly ascending
// A vote in pieces (replicated placement, sign path; docs/protocol.md), sent while the node still
// computes the rest (a framework's backward):
//   VotePiece   (node → server, kVotePiece)  round u64 | loss f64 | state digest [32] |
//                                              dimension u64 | index u32 | count u32 |
//                                              words [W·index/count, W·(index+1)/count) of the
//                                              packed signs, W = ⌈d/64⌉
// Decisions relayed by the nodes (ServerSessionOptions::relay_decisions; docs/protocol.md):
//   DecisionPiece (server → node, kDecisionPiece) round u64 | index u32 | count u32 | total u64 |
//                                              bytes [total·index/count, total·(index+1)/count)
//                                              of the round's Decision or FloatDecision payload
//   RelayedPiece (node → nodes, kDecisionPiece) the server's envelope of a DecisionPiece (136 bytes,
//                                              transport/envelope.h) | that DecisionPiece payload
//   DecisionRequest (node → server, kControl)  tag "DREQ" | round u64: the decision of that
//                                              round, sent whole (a relay withheld a piece)
//   Join        (node → server, kControl)      tag "JOIN" | round the node holds u64 |
//                                              its state digest [32]
//   Finish      (server → nodes, kControl)     tag "DONE" | rounds completed u64
//   Evidence    (node → server, kControl)      tag "PRUF" | an equivocation proof its verifier
//                                              holds (2 × 136-byte envelopes, transport/envelope.h)
//   state transfer (server → node, kStateTransfer): the checkpoint bytes themselves
//                                            (runtime/checkpoint.h; they carry the round); a
//                                            restarted server's first one has the section
//                                            kResumedSection (one byte, 1)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

#include "coding/codec.h"
#include "core/bit_vector.h"
#include "core/result.h"
#include "learning/optimizer.h"
#include "transport/crypto.h"
#include "transport/envelope.h"

namespace ballot::runtime {

// The section that marks a state transfer as a restarted server's: votes of its round sent to the
// server process before it were lost (a node that sent one sends it again).
inline constexpr std::string_view kResumedSection = "resumed";

// The digests RoundStart and votes carry are Replica::state_digest() (runtime/replica.h): the
// parameters' digest every digest_every rounds, a chain over the decisions in between.
struct RoundStart {
  std::uint64_t round = 0;
  std::uint32_t deadline_ms = 0;     // relative: clocks of different machines need not agree
  transport::Digest model_digest{};  // the server's state digest before this round
};

// The mean of the losses messages report, over the finite ones: a loss is its sender's claim (a
// metric, never used to decide), and one NaN or infinity would make every mean one. NaN when none
// is finite (a receiver's mean then leaves it out too).
class FiniteLossMean {
 public:
  void add(double loss) noexcept;
  double value() const noexcept;

 private:
  double sum_ = 0.0;
  std::size_t count_ = 0;
};

struct Vote {
  std::uint64_t round = 0;
  double loss = 0.0;                 // mean batch loss of the node's partitions (for progress)
  transport::Digest model_digest{};  // the state digest of the model the vote was computed on
  BitVector signs;
};

// Exchange placement: one partition's signs, node j → the nodes of column j (kPartitionSigns). The
// Vote layout (encode / decode_vote), with partition j's batch loss and signs.
using PartitionSigns = Vote;

// Exchange placement: a vote and the signed envelopes (author, round, payload digest, author's
// signature) of exactly the inputs it counted. The server can check each envelope against the
// author's key and compare digests across votes: two votes that counted different digests of one
// author in one round are a self-contained equivocation proof (transport::EquivocationProof).
struct AuditedVote {
  Vote vote;
  std::vector<transport::SignedEnvelope> inputs;
};

struct Decision {
  std::uint64_t round = 0;
  learning::StepScale scale;  // finite, >= 0, not -0 (decoders check)
  bool full_digest = false;   // Replica::apply: the state digest after it is the parameters'
  BitVector signs;
};

// The gradient path (rule != "vote"): a node sends its gradient through a codec, the server
// aggregates with a robust rule and sends back the fp32 direction every replica applies.
//   EncodedVote   (node → server, kVote)    round u64 | loss f64 | model digest [32] | length u64 | codec bytes
//   FloatDecision (server → nodes, kDecision) round u64 | η f32 | λ f32 | full digest u8 | dimension u64 |
//                                             form u8 | body
//     form 0, dense:  d little-endian floats
//     form 1, sparse: count u64 | count × index u32, strictly rising | count × value f32; the
//                     other coordinates are +0 (bits 0), so no value is +0 (-0 is an entry)
//     The encoder takes the sparse form iff its body is smaller (8 + 8·count < 4·d, d ≤ 2^32),
//     and the decoder refuses the other choice: one encoding per direction. A global top-k
//     decision (k of d nonzero) or a mean of sparse codecs' messages costs 8 bytes an entry.
struct EncodedVote {
  std::uint64_t round = 0;
  double loss = 0.0;
  transport::Digest model_digest{};  // the state digest of the model it was computed on
  std::vector<std::uint8_t> bytes;   // coding::Codec output; the server's codec validates it
};

struct FloatDecision {
  std::uint64_t round = 0;
  learning::StepScale scale;
  bool full_digest = false;
  std::vector<float> direction;
};

// One piece of a round's decision payload, signed by the server; the pieces of one round share
// count and total, and piece `index` holds the bytes [total·index/count, total·(index+1)/count).
struct DecisionPiece {
  std::uint64_t round = 0;
  std::uint32_t index = 0;
  std::uint32_t count = 0;
  std::uint64_t total = 0;
  std::vector<std::uint8_t> bytes;
};
// Where piece `index` of `count` starts in a payload of `total` bytes (index == count: the end).
std::uint64_t piece_offset(std::uint64_t total, std::uint32_t index, std::uint32_t count);
// The size in bytes of a decision payload (Decision when `sign_vote`), or the largest a
// FloatDecision's can be (the dense form).
std::uint64_t decision_bytes(std::size_t dimension, bool sign_vote);
// The payload limits the transport of a run needs (checked before a frame is allocated): the
// defaults of transport/frame.h, raised for the types whose payloads grow with the model to what
// this run's largest one takes — a vote (the codec's `codec_bytes`, or the signs, with up to
// `nodes` audited envelopes), partition signs, a decision and a relayed piece of one — so that a
// large model is not refused (fp32 votes of d = 25.6 M are 102 MB) and no limit ever drops below
// its default.
transport::FrameLimits round_frame_limits(std::size_t dimension, std::size_t codec_bytes, bool sign_vote,
                                          std::size_t nodes);

// The server's side: `payload` (a decision of `round`) cut into `count` ≥ 1 pieces.
std::vector<DecisionPiece> cut_decision(std::uint64_t round, std::span<const std::uint8_t> payload,
                                        std::uint32_t count);
// A node's side: the pieces of one decision as they arrive, in any order. add() returns the whole
// payload once every piece is in (and starts afresh); a repeated piece, or one of another count
// or total than the first (another server process's cut), changes nothing.
class DecisionAssembly {
 public:
  std::optional<std::vector<std::uint8_t>> add(const DecisionPiece& piece);
  bool empty() const noexcept { return count_ == 0; }
  void clear() { *this = DecisionAssembly{}; }

 private:
  std::uint32_t count_ = 0;
  std::uint32_t held_ = 0;
  std::vector<std::uint8_t> bytes_;
  std::vector<bool> have_;
};

// One piece of a node's vote: every piece repeats the vote's head (round, loss, digest), and the
// pieces of one vote share count. 1 ≤ count ≤ max(1, W): no piece is empty (W = ⌈d/64⌉ words).
struct VotePiece {
  std::uint64_t round = 0;
  double loss = 0.0;
  transport::Digest model_digest{};
  std::uint64_t dimension = 0;
  std::uint32_t index = 0;
  std::uint32_t count = 1;
  std::vector<std::uint64_t> words;  // the words [vote_piece_word(W, index, count), … index + 1 …)
};
// The first word of piece `index` of `count` over `words` words (index == count: the end).
std::size_t vote_piece_word(std::size_t words, std::uint32_t index, std::uint32_t count);
// OK iff a vote of `words` words may have a piece `index` of `count`: 1 ≤ count ≤ max(1, words)
// (no piece is empty) and index < count; else kInvalidArgument saying so.
Status check_vote_piece(std::size_t words, std::uint32_t index, std::uint32_t count);
// The server's side: one node's pieces of one round's vote, in any order. add() returns the vote
// once every piece is in; nullopt while some are missing or for a repeat of a held piece.
// kMalformed, and nothing kept of the piece, for a piece whose head (round, loss, digest, count)
// differs from the first one's, a second piece `index` with other words, or a complete vote whose
// padding bits are set: the node signed two different things for one round.
class VoteAssembly {
 public:
  Result<std::optional<Vote>> add(const VotePiece& piece);
  bool empty() const noexcept { return held_ == 0; }
  std::uint64_t bytes() const noexcept { return bytes_; }  // the payload bytes of the pieces held
  void clear() { *this = VoteAssembly{}; }

 private:
  VotePiece head_;  // the first piece's head (its words not kept here)
  std::uint32_t held_ = 0;
  std::uint64_t bytes_ = 0;
  std::vector<std::uint64_t> words_;
  std::vector<bool> have_;
};

// A node hands on the piece the server sent it, with the server's envelope: receivers check the
// server's signature, not the relay's word.
struct RelayedPiece {
  transport::SignedEnvelope envelope;
  std::vector<std::uint8_t> piece;  // the DecisionPiece payload the envelope signs
};

struct DecisionRequest {
  std::uint64_t round = 0;
};

struct Join {
  std::uint64_t round = 0;           // the round the node's state is at (0 after a fresh start)
  transport::Digest state_digest{};  // its Replica::state_digest(): another than the server's gets the state
};

struct Finish {
  std::uint64_t rounds = 0;
};

// A node forwards the equivocation proofs its transport found (a peer sent it two different
// signed payloads of one type in one round) so the server can quarantine the author. The proof is
// self-contained: the server checks both signatures against the registry.
struct Evidence {
  transport::EquivocationProof proof;
};

std::vector<std::uint8_t> encode(const RoundStart& message);
std::vector<std::uint8_t> encode(const Vote& message);
std::vector<std::uint8_t> encode(const AuditedVote& message);
std::vector<std::uint8_t> encode(const Decision& message);
std::vector<std::uint8_t> encode(const EncodedVote& message);
std::vector<std::uint8_t> encode(const FloatDecision& message);
std::vector<std::uint8_t> encode(const DecisionPiece& message);
std::vector<std::uint8_t> encode(const VotePiece& message);
std::vector<std::uint8_t> encode(const RelayedPiece& message);
std::vector<std::uint8_t> encode(const DecisionRequest& message);
std::vector<std::uint8_t> encode(const Join& message);
std::vector<std::uint8_t> encode(const Finish& message);
std::vector<std::uint8_t> encode(const Evidence& message);

Result<RoundStart> decode_round_start(std::span<const std::uint8_t> bytes);
// `dimension` is the model's parameter count: a vote of any other size is kMalformed.
Result<Vote> decode_vote(std::span<const std::uint8_t> bytes, std::size_t dimension);
// At most `max_inputs` envelopes (n) are accepted, checked before allocating; each must decode
// (transport::decode_envelope), be a kPartitionSigns envelope, and the authors must be strictly
// ascending. Whether they are valid inputs for this voter and round is the server's check.
Result<AuditedVote> decode_audited_vote(std::span<const std::uint8_t> bytes, std::size_t dimension,
                                        std::size_t max_inputs);
Result<Decision> decode_decision(std::span<const std::uint8_t> bytes, std::size_t dimension);
// `max_bytes` bounds the codec payload (the codec's wire size for the model) before copying.
Result<EncodedVote> decode_encoded_vote(std::span<const std::uint8_t> bytes, std::size_t max_bytes);
// `listed`, when not null, receives the sparse form's entries as listed (indices rising, values
// never +0: −0 and NaN are entries); it is nullopt for the dense form and for refused bytes. The
// direction may take the memory of `storage` (whatever it holds is overwritten), so that a caller
// decoding a decision a round reuses one allocation.
Result<FloatDecision> decode_float_decision(std::span<const std::uint8_t> bytes, std::size_t dimension,
                                            std::optional<coding::SparseGradient>* listed = nullptr,
                                            std::vector<float> storage = {});
// What a replica's state chain takes of a FloatDecision's direction (runtime/replica.h):
// transport::payload_digest of its body in the wire form, after the form byte — the d floats when
// dense, count ‖ indices ‖ values when sparse. For one d the two bodies never have the same length,
// so the digest names the direction, and a sparse direction costs its entries to hash, not 4d bytes.
transport::Digest direction_digest(std::span<const float> direction);
// The same digest read off an encoded FloatDecision (bytes encode() wrote or decode_float_decision()
// accepted; never a sign Decision's): the payload digest of the bytes after its form byte, the body
// as it travels, so the entries are not counted and listed again.
transport::Digest direction_digest_of_decision(std::span<const std::uint8_t> float_decision);
// A piece of a decision of at most `max_total` bytes (decision_bytes()) in at most `max_count`
// pieces: index < count, and the bytes exactly the piece's range of its `total`.
Result<DecisionPiece> decode_decision_piece(std::span<const std::uint8_t> bytes, std::uint64_t max_total,
                                            std::size_t max_count);
// A piece of a vote over `dimension` coordinates: 1 ≤ count ≤ max(1, ⌈dimension/64⌉), index <
// count, and exactly the piece's words. Whether the vote's padding bits are clear is VoteAssembly's
// check (only the last piece holds them).
Result<VotePiece> decode_vote_piece(std::span<const std::uint8_t> bytes, std::size_t dimension);
// The envelope (transport::decode_envelope) and the piece bytes; what they are is the receiver's
// check (the server's signature, the type, round and job, the digest).
Result<RelayedPiece> decode_relayed_piece(std::span<const std::uint8_t> bytes);
// Control payloads: one of Join, Finish, Evidence or DecisionRequest, told apart by their tag.
using Control = std::variant<Join, Finish, Evidence, DecisionRequest>;
Result<Control> decode_control(std::span<const std::uint8_t> bytes);

}  // namespace ballot::runtime
