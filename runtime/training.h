// The deterministic core of a training run, shared by the process cluster and the simulator:
// what every participant computes, given the run's options and seed.
//
//   TrainingOptions   what the user chooses (n, b, code, model, update rule, rates, seed, …)
//   TrainingSetup     what follows from them and is the same in every process: the dataset,
//                     the allocation matrix G, the partition sampler, the learning-rate schedule
//
// What each participant does with a setup: runtime/replica.h (the model every participant holds
// and updates with the round's decision) and runtime/node_worker.h (node i's work in a round).

// Thread-safety: none; one object per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attacks/attack_spec.h"
#include "coding/allocation_matrix.h"
#include "core/registry.h"
#include "core/result.h"
#include "core/rng.h"
#include "learning/dataset.h"
#include "learning/optimizer.h"
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

// The random stream of a stochastic codec at node `node` in round `round`: the same in the
// process cluster, the simulator and the lockstep engine.
Rng codec_rng(const TrainingSetup& setup, std::uint64_t round, std::size_t node);

}  // namespace ballot::runtime
