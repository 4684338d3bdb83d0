// Node i's work in a round, on its replica (runtime/replica.h).
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

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "core/bit_vector.h"
#include "core/result.h"
#include "learning/dataset.h"
#include "learning/optimizer.h"
#include "runtime/replica.h"
#include "runtime/training.h"

namespace ballot::runtime {

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

}  // namespace ballot::runtime
