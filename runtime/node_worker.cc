#include "runtime/node_worker.h"

#include <algorithm>

#include "attacks/data_attacks.h"
#include "coding/election_encoder.h"
#include "core/byte_io.h"
#include "core/enforce.h"
#include "kernels/majority_vote.h"
#include "kernels/sign_kernels.h"

namespace ballot::runtime {

NodeWorker::NodeWorker(const TrainingSetup& setup, std::size_t node)
    : NodeWorker(setup, node,
                 setup.options.placement == Placement::kExchange && setup.sign_vote()
                     ? std::vector<std::uint32_t>{static_cast<std::uint32_t>(node)}
                     : setup.code.row(node),
                 /*honest=*/!setup.is_byzantine(node)) {}

NodeWorker NodeWorker::all_partitions(const TrainingSetup& setup) {
  std::vector<std::uint32_t> every(setup.options.nodes);
  for (std::size_t j = 0; j < every.size(); ++j) every[j] = static_cast<std::uint32_t>(j);
  return NodeWorker(setup, 0, std::move(every), /*honest=*/true);
}

NodeWorker::NodeWorker(const TrainingSetup& setup, std::size_t node, std::vector<std::uint32_t> partitions, bool honest)
    : setup_(&setup), node_(node), honest_(honest), partitions_(std::move(partitions)) {
  for (auto partition : partitions_) {
    if (setup.options.worker_momentum > 0)
      momentum_.emplace(partition, learning::WorkerMomentum(setup.options.worker_momentum));
  }
  signs_.resize(setup.options.nodes);
}

void NodeWorker::load_batch(std::uint64_t round, std::uint32_t partition) {
  const auto indices = setup_->sampler.indices(round, partition);
  learning::gather(setup_->data->train, indices, batch_);
  if (!honest_ && setup_->active(attacks::Domain::kData, round) != nullptr) {
    attacks::flip_labels(batch_.labels, setup_->data->train.num_classes);
  }
}

double NodeWorker::compute_gradient(Replica& replica, std::uint64_t round, std::uint32_t partition) {
  learning::Model& model = replica.model();
  if (source_) return source_(round, partition, model.gradients());
  load_batch(round, partition);
  return model.forward_backward(batch_.features, batch_.labels);
}

double NodeWorker::partition_signs(Replica& replica, std::uint64_t round, std::uint32_t partition, BitVector& signs) {
  const double loss = compute_gradient(replica, round, partition);
  signs_of(partition, replica.model().gradients(), signs);
  return loss;
}

void NodeWorker::signs_of(std::uint32_t partition, std::span<const float> gradient, BitVector& signs) {
  if (auto it = momentum_.find(partition); it != momentum_.end()) {
    it->second.update(gradient, signs);
  } else {
    kernels::pack_signs(gradient, signs);
  }
}

double NodeWorker::vote(Replica& replica, std::uint64_t round, BitVector& vote) {
  double loss = 0;
  for (auto partition : partitions_) loss += partition_signs(replica, round, partition, signs_[partition]);
  folded_vote(replica.dimension(), vote);
  return partitions_.empty() ? 0.0 : loss / static_cast<double>(partitions_.size());
}

Status NodeWorker::own_partition(std::uint32_t partition) const {
  if (std::find(partitions_.begin(), partitions_.end(), partition) != partitions_.end()) return {};
  return make_error(ErrorCode::kInvalidArgument,
                    "node " + std::to_string(node_) + " does not compute partition " + std::to_string(partition));
}

Status NodeWorker::fold(std::uint32_t partition, std::span<const float> gradient) {
  BALLOT_TRY(own_partition(partition));
  signs_of(partition, gradient, signs_[partition]);
  return {};
}

Status NodeWorker::fold_range(std::uint32_t partition, std::size_t dimension, std::size_t offset,
                              std::span<const float> gradient) {
  BALLOT_TRY(own_partition(partition));
  // Compared without forming offset + size, which a caller's offset near 2^64 would wrap.
  if (offset % 64 != 0 || offset > dimension || gradient.size() > dimension - offset ||
      ((offset + gradient.size()) % 64 != 0 && offset + gradient.size() != dimension)) {
    return make_error(ErrorCode::kInvalidArgument,
                      "a piece of the gradient starts at a multiple of 64 and ends at one or at the end (" +
                          std::to_string(dimension) + "), not at offset " + std::to_string(offset) + " with " +
                          std::to_string(gradient.size()) + " values");
  }
  BitVector& signs = signs_[partition];
  if (signs.size() != dimension) signs = BitVector(dimension);
  if (auto it = momentum_.find(partition); it != momentum_.end()) {
    it->second.update_range(dimension, offset, gradient, signs);
  } else {
    kernels::pack_signs_at(gradient, offset, signs);
  }
  return {};
}

std::vector<std::uint64_t> NodeWorker::folded_vote_words(std::size_t dimension, std::size_t begin,
                                                         std::size_t end) const {
  const std::size_t words = BitVector::words_for(dimension);
  BALLOT_ENFORCE(begin <= end && end <= words);
  // The row's signs restricted to the words: the majority is per coordinate, so the piece of the
  // vote is the vote of the pieces (the last word keeps its true width, so its padding stays 0).
  const std::size_t bits = std::min(dimension, end * 64) - std::min(dimension, begin * 64);
  std::vector<BitVector> pieces;
  for (const std::uint32_t j : setup_->code.row(node_)) {
    BALLOT_ENFORCE(signs_[j].size() == dimension, "partition " + std::to_string(j) + " is not folded");
    BitVector piece(bits);
    std::copy(signs_[j].words().begin() + static_cast<std::ptrdiff_t>(begin),
              signs_[j].words().begin() + static_cast<std::ptrdiff_t>(end), piece.words().begin());
    pieces.push_back(std::move(piece));
  }
  if (pieces.empty()) {
    BitVector all(bits, true);
    return {all.words().begin(), all.words().end()};
  }
  BitVector vote;
  kernels::majority_vote(std::span<const BitVector>(pieces), vote);
  return {vote.words().begin(), vote.words().end()};
}

void NodeWorker::folded_vote(std::size_t dimension, BitVector& vote) {
  // Partitions outside the row are never read by the encoder; give them the right size only.
  for (auto& signs : signs_) {
    if (signs.size() != dimension) signs.resize(dimension);
  }
  coding::encode_replicated(setup_->code, node_, signs_, vote);
}

const BitVector& NodeWorker::folded_signs(std::uint32_t partition) const {
  BALLOT_ENFORCE(partition < signs_.size());
  return signs_[partition];
}

Status NodeWorker::fold_signs(std::uint32_t partition, std::size_t dimension, std::span<const std::uint64_t> words) {
  BALLOT_TRY(own_partition(partition));
  BALLOT_ASSIGN_OR_RETURN(signs_[partition], BitVector::from_words(dimension, words));
  return {};
}

Status NodeWorker::fold_signs_range(std::uint32_t partition, std::size_t dimension, std::size_t first_word,
                                    std::span<const std::uint64_t> words) {
  BALLOT_TRY(own_partition(partition));
  const std::size_t total = BitVector::words_for(dimension);
  if (first_word > total || words.size() > total - first_word) {
    return make_error(ErrorCode::kInvalidArgument, "signs of words [" + std::to_string(first_word) + ", " +
                                                       std::to_string(first_word + words.size()) + ") of a vector of " +
                                                       std::to_string(total) + " words");
  }
  const std::size_t tail = dimension % 64;
  if (tail != 0 && !words.empty() && first_word + words.size() == total && (words.back() >> tail) != 0) {
    return make_error(ErrorCode::kInvalidArgument, "signs: padding bits past the dimension must be zero");
  }
  BitVector& signs = signs_[partition];
  if (signs.size() != dimension) signs = BitVector(dimension);
  std::copy(words.begin(), words.end(), signs.words().begin() + static_cast<std::ptrdiff_t>(first_word));
  return {};
}

const learning::WorkerMomentum* NodeWorker::momentum(std::uint32_t partition) const {
  const auto it = momentum_.find(partition);
  return it == momentum_.end() ? nullptr : &it->second;
}

Status NodeWorker::set_momentum(std::uint32_t partition, std::span<const float> values, std::size_t dimension) {
  const auto it = momentum_.find(partition);
  if (it == momentum_.end()) {
    return make_error(
        ErrorCode::kInvalidArgument,
        "node " + std::to_string(node_) + " keeps no worker momentum for partition " + std::to_string(partition));
  }
  if (values.size() != dimension) {
    return make_error(ErrorCode::kInvalidArgument, "worker momentum: expected " + std::to_string(dimension) +
                                                       " values, got " + std::to_string(values.size()));
  }
  it->second.assign(values);
  return {};
}

double NodeWorker::gradient(Replica& replica, std::uint64_t round) {
  return compute_gradient(replica, round, static_cast<std::uint32_t>(node_));
}

double NodeWorker::partition_gradient(Replica& replica, std::uint64_t round, std::uint32_t partition,
                                      std::vector<float>& gradient) {
  const double loss = compute_gradient(replica, round, partition);
  gradient.assign(replica.model().gradients().begin(), replica.model().gradients().end());
  return loss;
}

// Node state: per partition, in ascending order, partition u64 | length u64 | the momentum's state.
std::vector<std::uint8_t> NodeWorker::save_state() const {
  ByteWriter writer;
  for (const auto& [partition, momentum] : momentum_) {
    const auto state = momentum.save_state();
    writer.put<std::uint64_t>(partition).put<std::uint64_t>(state.size()).put_bytes(state);
  }
  return writer.take();
}

Status NodeWorker::load_state(std::span<const std::uint8_t> bytes, std::size_t dimension) {
  std::map<std::uint32_t, learning::WorkerMomentum> restored;
  ByteReader reader(bytes, "node state");
  while (reader.remaining() > 0) {
    BALLOT_ASSIGN_OR_RETURN(const auto partition, reader.read<std::uint64_t>("partition"));
    BALLOT_ASSIGN_OR_RETURN(const auto length, reader.read<std::uint64_t>("momentum length"));
    if (partition > UINT32_MAX || momentum_.count(static_cast<std::uint32_t>(partition)) == 0) {
      return reader.malformed("names partition " + std::to_string(partition) + ", which this node does not compute");
    }
    if (length > reader.remaining()) {
      return reader.malformed("partition " + std::to_string(partition) + "'s momentum runs past the end");
    }
    BALLOT_ASSIGN_OR_RETURN(const auto state, reader.take_bytes(static_cast<std::size_t>(length), "momentum"));
    learning::WorkerMomentum momentum(setup_->options.worker_momentum);
    BALLOT_TRY(momentum.load_state(state, dimension));
    restored.emplace(static_cast<std::uint32_t>(partition), std::move(momentum));
  }
  for (auto& [partition, momentum] : restored) momentum_.insert_or_assign(partition, std::move(momentum));
  return {};
}

}  // namespace ballot::runtime
