// The deterministic core of a training run, shared by the process cluster and the simulator:
// what every participant computes, given the run's options and seed.
//
//   TrainingOptions   what the user chooses (n, b, code, model, update rule, rates, seed, …)
//   TrainingSetup     what follows from them and is the same in every process: the dataset,
//                     the allocation matrix G, the partition sampler, the learning-rate schedule
//   Replica           one copy of the model and its server-side optimizer; every participant
//                     (server and nodes) holds one and applies the same decision v_r each round,
//                     so all replicas stay bit-identical (checked through digest())
//   NodeWorker        node i's work in a round: the signs of its partitions and its vote c_i
//
// Round r of the replicated placement (DESIGN.md, round protocol): node i computes the gradient
// of each partition j with G[i][j] = 1 on its replica (partition j of round r is the same batch
// everywhere), takes the signs — of the gradient, or of a per-partition momentum when
// worker_momentum > 0 (Signum with majority vote) — and votes c_i = maj_j sign(g_j). The server
// decides v_r = maj_i c_i over the votes it holds and everyone applies the update rule to v_r.
// Exchange placement: node j computes only partition j (with the same per-partition momentum),
// sends its signs to the nodes of column j, and node i votes over what it received
// (runtime/roles.h). Without faults every input equals what node i would have computed itself,
// so both placements give bit-identical models.

// Thread-safety: none; one object per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attacks/attack_spec.h"
#include "coding/allocation_matrix.h"
#include "coding/codec.h"
#include "core/bit_vector.h"
#include "core/registry.h"
#include "core/result.h"
#include "core/rng.h"
#include "learning/dataset.h"
#include "learning/model.h"
#include "learning/optimizer.h"
#include "runtime/checkpoint.h"
#include "transport/crypto.h"
#include "transport/frame.h"

namespace ballot::runtime {

enum class Placement : std::uint8_t { kReplicated, kExchange };

// The placements, one table line each (core/registry.h): `make` is the placement itself. The
// command line, the cluster file and the docs' list read this table.
using PlacementEntry = TableEntry<Placement>;
std::span<const PlacementEntry> placement_table();
Result<Placement> parse_placement(std::string_view name);  // kInvalidArgument naming the known ones
std::string_view placement_name(Placement placement);

struct TrainingOptions {
  std::size_t nodes = 7;               // n
  std::size_t byzantine = 1;           // b: the fault budget (quorum n - b after the deadline)
  std::string code = "deterministic";  // allocation matrix spec (coding/allocation_matrix.h);
                                       // "deterministic" alone means deterministic:b=<b>
  // Where G's inputs are computed (DESIGN.md round protocol step 2): kReplicated, node i computes
  // every partition of its row; kExchange, node j computes partition j and relays its signed
  // signs to column j (rule "vote" only; runtime/roles.h). Same model without faults.
  Placement placement = Placement::kReplicated;
  std::string model = "mlp:hidden=128";  // learning/models.h
  // Defaults: Signum with majority vote (Bernstein et al. 2019) through the election code: a
  // momentum per partition at the nodes, the vote applied as x ← x − η(v + λx) at every replica.
  // On Fashion-MNIST with the MLP this reaches 85% test accuracy by round ~750 (bench/runtime).
  std::string update = "sign:wd=0";                                    // server rule on the vote (learning/optimizer.h)
  double worker_momentum = 0.9;                                        // β of the per-partition momentum; 0 = signSGD
  std::string lr = "constant:lr=0.001 > cosine:rounds=1500,min=0.05";  // LrSchedule spec
  std::size_t partition_size = 32;  // examples per partition (global batch = n × this), ≤ kMaxPartitionSize
  std::uint64_t rounds = 1500;      // ≤ kMaxRounds
  std::uint64_t seed = 1;
  std::uint64_t job = 1;  // job id, bound into every signed envelope
  // "fashion-mnist[:dir=…]", "synthetic[:…]" or "external:train=N" (the nodes hold the examples,
  // e.g. ballot.torch; Ballot only samples indices of a training set of N examples)
  std::string data = "fashion-mnist";
  // The adversary (attacks/attack_spec.h, docs/attacks.md): `attackers` Byzantine nodes do
  // `attack` — "none", a gradient-domain attack ("alie", "ipm:eps=0.5", …), a sign-domain one
  // ("reverse", "omniscient", …), "label_flip", a protocol attack ("crash", "equivocation", …) or
  // several joined by '+'. `attacker_choice` picks them: "random" (drawn once from the seed, the
  // paper's model), "worst" (the worst coalition for G) or an index list "0,3,5" (then
  // `attackers` may be 0: the list says how many).
  std::string attack = "none";
  std::size_t attackers = 0;
  std::string attacker_choice = "random";
  // The aggregation: "vote" is the sign path above (1-bit votes through the election code G).
  // Anything else is a robust rule or pipeline of robust/registry.h ("mean", "median",
  // "trimmed_mean:f=1", "nnm:f=1 > krum:f=1", …): each node sends the gradient of its own
  // partition (G is not used) through `codec` (coding/codec_registry.h: "fp32", "qsgd:s=16",
  // "topk:ratio=0.01,ef=1", …), the server aggregates the decoded gradients with the rule and
  // every replica applies `update` (e.g. "sgd:momentum=0.9") to the fp32 result. With "vote" the
  // codec must stay "fp32" (validate() rejects any other: it would go unused).
  std::string rule = "vote";
  std::string codec = "fp32";
  std::uint64_t eval_every = 100;  // rounds between test-set evaluations (0 = end only)
  // Every replica's state digest (Replica::state_digest, what RoundStart and votes carry) is the
  // SHA-256 of all parameters at rounds that are multiples of this, and a chain over the decisions
  // in between (hashing d/8 decision bytes instead of 4d parameter bytes). 1: every round.
  std::uint64_t digest_every = 10;
  std::size_t eval_examples = 10000;  // test examples per evaluation (the first ones)

  static constexpr std::size_t kMaxPartitionSize = std::size_t{1} << 24;
  static constexpr std::uint64_t kMaxRounds = std::uint64_t{1} << 48;

  // Checks ranges and that the specs parse; errors name the option.
  Status validate() const;
};

// Loads the dataset named by `options.data`.
Result<learning::TrainTestSplit> load_training_data(const TrainingOptions& options);

struct TrainingSetup {
  TrainingOptions options;
  std::shared_ptr<const learning::TrainTestSplit> data;
  coding::AllocationMatrix code;
  learning::PartitionSampler sampler;
  learning::LrSchedule schedule;
  attacks::AttackSpec attack;
  std::vector<std::size_t> byzantine;  // node indices that attack, ascending

  bool sign_vote() const { return options.rule == "vote"; }
  bool is_byzantine(std::size_t node) const;
  // The attacker's behaviour of `domain` when it is active in `round`, else null.
  const attacks::Behaviour* active(attacks::Domain domain, std::uint64_t round) const;
};

// The allocation matrix G the options name ("deterministic" takes b from the fault budget).
Result<coding::AllocationMatrix> make_code(const TrainingOptions& options);
// The Byzantine node indices the options choose (empty without an attack), ascending.
Result<std::vector<std::size_t>> choose_attackers(const TrainingOptions& options, const coding::AllocationMatrix& code);

Result<TrainingSetup> make_training_setup(const TrainingOptions& options,
                                          std::shared_ptr<const learning::TrainTestSplit> data);
// The transport's payload limits for this run (runtime/messages.h round_frame_limits): the
// dimension and the codec's wire size from a model made once for them. Every process of a run
// computes the same.
Result<transport::FrameLimits> frame_limits(const TrainingSetup& setup);

class Replica {
 public:
  static Result<Replica> create(const TrainingSetup& setup);

  // The scale of round `round`'s update: the schedule's η(round) and the rule's λ as float32. The
  // server computes it and sends its bits in the decision; nodes apply the decision's.
  learning::StepScale scale(std::uint64_t round) const { return optimizer_->scale(schedule_.at(round)); }
  // Whether the state digest after round `round`'s decision is the parameters' (round + 1 is a
  // multiple of options.digest_every). The server's answer travels in the decision.
  bool full_digest_after(std::uint64_t round) const { return (round + 1) % digest_every_ == 0; }
  // Applies round `round`'s decision: the update rule at `scale` on the packed vote, then moves the
  // state digest to round + 1 (the parameters' digest when `full_digest`, else the chain).
  void apply(std::uint64_t round, const BitVector& decision, learning::StepScale scale, bool full_digest);
  // The same for the gradient path: the update rule on the aggregated fp32 direction.
  void apply(std::uint64_t round, std::span<const float> direction, learning::StepScale scale, bool full_digest);
  // The same for a direction that came in `float_decision`, the FloatDecision's bytes: when the chain
  // takes the direction's digest, it is read off them (direction_digest_of_decision), with no pass
  // over the direction.
  void apply(std::uint64_t round, std::span<const float> direction, learning::StepScale scale, bool full_digest,
             std::span<const std::uint8_t> float_decision);
  // With the replica's own scale(round) and full_digest_after(round) (one process: the lockstep
  // engine, tests).
  void apply(std::uint64_t round, const BitVector& decision) {
    apply(round, decision, scale(round), full_digest_after(round));
  }
  void apply(std::uint64_t round, std::span<const float> direction) {
    apply(round, direction, scale(round), full_digest_after(round));
  }
  // Called after each vote decision is applied, with what apply() got: a driver that keeps a copy
  // of the parameters elsewhere (ballot.torch on a GPU) applies the same step there. State
  // transfers (restore_from) do not call it. One observer; an empty function removes it.
  using VoteObserver =
      std::function<void(std::uint64_t round, const BitVector& vote, learning::StepScale scale, bool full_digest)>;
  void set_vote_observer(VoteObserver observer) { vote_observer_ = std::move(observer); }
  // Round `round`'s decision as it travels (runtime/messages.h: a Decision when `sign_vote`, else
  // a FloatDecision), decoded and applied with its own scale and digest flag. kMalformed, the
  // replica unchanged, when the bytes are not a decision of that round for this dimension.
  // `applied`, when not null, receives a FloatDecision's direction once applied, and its entries
  // when it came in the sparse form (decode_float_decision); the direction reuses the memory of
  // the one it held, so a caller that keeps it allocates d floats once. After an error it holds
  // no entries, and the direction is not one to read.
  struct AppliedDirection {
    std::vector<float> direction;
    std::optional<coding::SparseGradient> listed;
  };
  Status apply_decision(std::uint64_t round, std::span<const std::uint8_t> payload, bool sign_vote,
                        AppliedDirection* applied = nullptr);
  // SHA-256 of the parameters: equal digests mean bit-identical models. O(d).
  transport::Digest digest() const;
  // The digest RoundStart and votes carry, O(1) (apply() maintains it). After a decision flagged
  // full_digest (the server's rounds that are multiples of options.digest_every), and after create
  // or a restore without one, it is payload_digest(parameters) (transport/crypto.h: every
  // parameter byte); in between it chains
  //   SHA-256("ballot.state.v1" ‖ previous ‖ round u64 ‖ η bits u32 ‖ λ bits u32 ‖ D)
  // with D = payload_digest(packed signs) or direction_digest(direction) (runtime/messages.h)
  // so replicas that applied the same decisions from the same state agree without hashing 4d bytes
  // a round, and a replica whose parameters diverged is caught at the next multiple.
  const transport::Digest& state_digest() const noexcept { return state_digest_; }
  // On the first `max_examples` of `data`; count 0 (nothing evaluated) for a parameters-only
  // model (learning/parameter_model.h: its nodes compute in their own framework) or no data.
  learning::Evaluation evaluate(const learning::Dataset& data, std::size_t max_examples) const;

  // The update rule (for a copy of its state elsewhere: learning::Optimizer::sgd_view).
  const learning::Optimizer& optimizer() const { return *optimizer_; }
  learning::Model& model() { return *model_; }
  const learning::Model& model() const { return *model_; }
  std::size_t dimension() const { return model_->parameters().size(); }

  // Sections "model", "optimizer" (raw little-endian floats and the optimizer's state) and
  // "state_digest" (32 bytes).
  void save_to(Checkpoint& checkpoint) const;
  // Validates sizes; the replica is unchanged on error.
  Status restore_from(const Checkpoint& checkpoint);

 private:
  Replica(std::unique_ptr<learning::Model> model, std::unique_ptr<learning::Optimizer> optimizer,
          learning::LrSchedule schedule, std::uint64_t digest_every);
  // The chain's step; `decision_digest` is called only when the step is not a full digest.
  void advance_state_digest(std::uint64_t round, learning::StepScale scale, bool full_digest,
                            const std::function<transport::Digest()>& decision_digest);
  std::unique_ptr<learning::Model> model_;
  std::unique_ptr<learning::Optimizer> optimizer_;
  learning::LrSchedule schedule_;
  std::uint64_t digest_every_ = 1;
  transport::Digest state_digest_{};
  VoteObserver vote_observer_;
};

// Computes the gradient of partition `partition` of round `round` into `gradient` (the model's
// dimension) and returns the batch loss: a framework's forward/backward (ballot.torch) standing in
// for the built-in model's, for a worker that must compute partitions itself (an attacker's
// HonestView).
using GradientSource = std::function<double(std::uint64_t round, std::uint32_t partition, std::span<float> gradient)>;

class NodeWorker {
 public:
  // Node `node`: the partitions of its row of G (vote path, replicated placement), or only
  // partition `node` (exchange placement; the gradient path computes partition `node` too).
  // A Byzantine node with an active data-domain attack (label flip) trains on flipped labels.
  NodeWorker(const TrainingSetup& setup, std::size_t node);
  // An honest worker over every partition: what an omniscient coalition (runtime/adversary.h) and
  // the lockstep engine (runtime/experiment.h) compute once for all nodes.
  static NodeWorker all_partitions(const TrainingSetup& setup);

  std::size_t node() const noexcept { return node_; }
  const std::vector<std::uint32_t>& partitions() const noexcept { return partitions_; }

  // Signs of partition `partition` of round `round` on `replica`'s parameters (uses and updates
  // the partition's worker momentum when enabled). Also returns the batch loss.
  double partition_signs(Replica& replica, std::uint64_t round, std::uint32_t partition, BitVector& signs);
  // Replicated placement: c_i = maj over this node's partitions. Returns the mean batch loss.
  double vote(Replica& replica, std::uint64_t round, BitVector& vote);
  // For nodes whose framework computes the gradients (ballot.torch): the signs of `partition`
  // (one of partitions()) from its gradient on the batch sampler.indices(round, partition), through
  // the partition's worker momentum as partition_signs does; kept for folded_vote / folded_signs.
  Status fold(std::uint32_t partition, std::span<const float> gradient);
  // c_i over the partitions folded this round (vote's encoding; `dimension` = the gradients').
  void folded_vote(std::size_t dimension, BitVector& vote);
  // The same in pieces, for a vote sent while backward runs (NodeSession::submit_vote_piece):
  // coordinates [offset, offset + gradient.size()) of `partition`'s gradient of `dimension`
  // (offset a multiple of 64, ending at a multiple of 64 or at `dimension`), through the same
  // worker momentum; then the words [begin, end) of c_i. Pieces that cover the gradient once give
  // the bits fold and folded_vote give.
  Status fold_range(std::uint32_t partition, std::size_t dimension, std::size_t offset,
                    std::span<const float> gradient);
  std::vector<std::uint64_t> folded_vote_words(std::size_t dimension, std::size_t begin, std::size_t end) const;
  // The signs `fold` kept for `partition` (the exchange placement's own partition).
  const BitVector& folded_signs(std::uint32_t partition) const;
  // For a driver that runs the worker momentum and the packing itself (ballot.torch on the model's
  // GPU: only d/8 bytes a partition reach the host): `partition`'s signs as fold would keep them,
  // `words` packed as BitVector's (padding bits zero). The worker momentum is not touched.
  Status fold_signs(std::uint32_t partition, std::size_t dimension, std::span<const std::uint64_t> words);
  // The same for a piece, as fold_range keeps one: `words` are the signs of coordinates
  // [64·first_word, 64·(first_word + words.size())) ∩ [0, dimension).
  Status fold_signs_range(std::uint32_t partition, std::size_t dimension, std::size_t first_word,
                          std::span<const std::uint64_t> words);
  // `partition`'s worker momentum (empty before its first fold), or null when the run has none or
  // the partition is not this node's. set_momentum replaces it (`values` of the model's dimension),
  // so the node state file keeps what such a driver computed.
  const learning::WorkerMomentum* momentum(std::uint32_t partition) const;
  Status set_momentum(std::uint32_t partition, std::span<const float> values, std::size_t dimension);
  // Gradient path: the node's own gradient of round `round`, left in replica.model().gradients()
  // until the next computation on that replica (an adversary's view of the round computes too).
  // Returns the batch loss. partition_gradient: partition `partition`'s, copied into `gradient`.
  double gradient(Replica& replica, std::uint64_t round);
  double partition_gradient(Replica& replica, std::uint64_t round, std::uint32_t partition,
                            std::vector<float>& gradient);

  // Computes gradients with `source` instead of the replica model's forward_backward.
  void set_gradient_source(GradientSource source) { source_ = std::move(source); }

  // Worker momentum, for the node's local state file.
  std::vector<std::uint8_t> save_state() const;
  Status load_state(std::span<const std::uint8_t> bytes, std::size_t dimension);

 private:
  NodeWorker(const TrainingSetup& setup, std::size_t node, std::vector<std::uint32_t> partitions, bool honest);
  void load_batch(std::uint64_t round, std::uint32_t partition);
  void signs_of(std::uint32_t partition, std::span<const float> gradient, BitVector& signs);
  // kInvalidArgument unless `partition` is one of partitions().
  Status own_partition(std::uint32_t partition) const;

  const TrainingSetup* setup_;
  std::size_t node_;
  bool honest_;  // false: may apply the node's data-domain attack
  std::vector<std::uint32_t> partitions_;
  std::map<std::uint32_t, learning::WorkerMomentum> momentum_;
  learning::Batch batch_;
  std::vector<BitVector> signs_;
  GradientSource source_;
  // The gradient of `partition` into the replica model's gradients(); returns the loss.
  double compute_gradient(Replica& replica, std::uint64_t round, std::uint32_t partition);
};

// The random stream of a stochastic codec at node `node` in round `round`: the same in the
// process cluster, the simulator and the lockstep engine.
Rng codec_rng(const TrainingSetup& setup, std::uint64_t round, std::size_t node);

// The server's decision from the votes it holds (absent nodes are skipped): the majority, ties
// to +1 (coding::decode). With no vote at all the decision is all +1 — callers never apply a
// round without quorum.
BitVector decide(std::span<const BitVector* const> votes, std::size_t dimension);

}  // namespace ballot::runtime
