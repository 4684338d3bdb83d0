// The Byzantine side of a run: what an attacking node sends instead of its honest message.
//
// The attacks themselves are attacks/ (formulas, specs, targets); this file crafts a Byzantine
// node's messages from them, and runtime/node_attacks.h applies them at the node session's seam. Omniscient attacks
// (ALIE, IPM, mimic, the code-aware election attack, …) need the round's honest messages. The coalition gets them
// without any extra network channel: every participant holds the same replica, and partition j of round r is a fixed
// batch, so a Byzantine node can recompute every honest message bit for bit (HonestView). That is the strongest side
// channel there is — the attackers know exactly what the honest nodes send, before they send it —
// and it works the same in the process cluster (each attacker process recomputes) and in the
// simulator (the attacking threads share one Coalition, so a round is computed once).
//
// Thread-safety: HonestView none; Coalition is safe to share between threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "core/bit_vector.h"
#include "runtime/node_worker.h"
#include "runtime/replica.h"
#include "runtime/training.h"

namespace ballot::runtime {

// Every honest message of one round.
struct RoundView {
  std::uint64_t round = 0;
  // Vote path: the honest signs of every partition j (column j of G), and the vote c_i every node
  // i would send honestly.
  std::vector<BitVector> partition_signs;
  std::vector<BitVector> honest_votes;
  // Gradient path: the honest gradient of every node i (partition i).
  std::vector<std::vector<float>> gradients;
  std::vector<double> losses;            // per node: its honest batch loss (mean over its row)
  std::vector<double> partition_losses;  // vote path, per partition j: its batch loss
  // The coalition's votes when the omniscient election attack is active this round (one per
  // Byzantine node, in setup.byzantine order), computed once for all members; else empty.
  std::vector<BitVector> omniscient_votes;
};

// Recomputes the honest messages of a round on a replica that holds that round's model. Keeps the
// per-partition worker momentum of every partition, so it is exact when it sees every round in
// order. After a gap — the attacker crashed for some rounds (crash:until=), caught up through a
// state transfer, or its process restarted — its momentum misses those rounds' gradients and the
// crafted messages are approximate; the error decays as β^k over the next k rounds (β the worker
// momentum). With worker momentum 0 it is always exact.
class HonestView {
 public:
  // `source` (may be empty: the replica model's forward pass) computes the partitions' gradients.
  explicit HonestView(const TrainingSetup& setup, GradientSource source = {});
  const RoundView& compute(Replica& replica, std::uint64_t round);
  const RoundView& last() const noexcept { return view_; }

 private:
  const TrainingSetup* setup_;
  NodeWorker worker_;
  RoundView view_;
};

// The view shared by the attackers of one process: the first member to ask for round r computes
// it on its replica (all replicas are identical), the others reuse it. The views of the last
// kKeptRounds rounds are kept, so a member that lags a round behind (the server decided without
// it) gets the view of its round instead of advancing the momentum out of order.
class Coalition {
 public:
  static constexpr std::size_t kKeptRounds = 8;
  explicit Coalition(const TrainingSetup& setup, GradientSource source = {}) : view_(setup, std::move(source)) {}
  std::shared_ptr<const RoundView> view(Replica& replica, std::uint64_t round);

 private:
  std::mutex mutex_;  // guards everything below
  HonestView view_;
  std::map<std::uint64_t, std::shared_ptr<const RoundView>> recent_;  // round → view
};

// Whether the run's attack needs the honest messages (gradient-domain or omniscient attacks).
bool needs_honest_view(const TrainingSetup& setup);

// Vote path: Byzantine node `node`'s vote of `round`. `vote` holds its own vote (honest, or
// computed on flipped labels) and is replaced according to the active gradient- or sign-domain
// behaviour; `view` may be null when !needs_honest_view(setup). Deterministic.
void byzantine_vote(const TrainingSetup& setup, const RoundView* view, std::size_t node, std::uint64_t round,
                    BitVector& vote);

// Gradient path: the same for the gradient `gradient` (own, replaced by the crafted vector).
void byzantine_gradient(const TrainingSetup& setup, const RoundView* view, std::size_t node, std::uint64_t round,
                        std::vector<float>& gradient);

// Protocol domain. Whether Byzantine node `node` drops its vote of `round` under the omission
// attack: a Bernoulli(p) draw from the run's seed, the same in every engine.
bool omits_vote(const TrainingSetup& setup, std::size_t node, std::uint64_t round);

// The index of Byzantine node `node` within setup.byzantine (its rank in the coalition).
std::size_t coalition_rank(const TrainingSetup& setup, std::size_t node);

}  // namespace ballot::runtime
