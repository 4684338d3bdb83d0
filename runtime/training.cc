#include "runtime/training.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "attacks/data_attacks.h"
#include "attacks/targets.h"
#include "coding/codec_registry.h"
#include "coding/dgc.h"
#include "coding/election_encoder.h"
#include "core/byte_io.h"
#include "core/enforce.h"
#include "core/spec.h"
#include "kernels/majority_vote.h"
#include "kernels/sign_kernels.h"
#include "learning/models.h"
#include "robust/registry.h"
#include "runtime/messages.h"

namespace ballot::runtime {

std::span<const PlacementEntry> placement_table() {
  static const PlacementEntry table[] = {
      {"replicated", "", "replicated", "node i computes every partition of its row of G (Sohn et al. 2020)",
       Placement::kReplicated},
      {"exchange", "", "exchange",
       "node j computes partition j and sends its signed signs to the nodes of column j, which vote over them",
       Placement::kExchange},
  };
  return table;
}

Result<Placement> parse_placement(std::string_view name) {
  const auto table = placement_table();
  if (const auto* entry = find_entry(table, name)) return entry->make;
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown placement '" + std::string(name) + "' (known: " + joined_names(table) + ")");
}

std::string_view placement_name(Placement placement) {
  for (const auto& entry : placement_table())
    if (entry.make == placement) return entry.name;
  return "unknown";
}

namespace {

Error bad_option(const std::string& what) { return make_error(ErrorCode::kInvalidArgument, what); }

// "deterministic" alone takes b from the run's fault budget.
Result<Spec> code_spec(const TrainingOptions& options) {
  BALLOT_ASSIGN_OR_RETURN(Spec spec, Spec::parse(options.code));
  if (spec.name() == "deterministic" && !spec.has("b")) {
    return Spec::parse("deterministic:b=" + std::to_string(options.byzantine));
  }
  return spec;
}

std::vector<std::uint8_t> float_bytes(std::span<const float> values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

}  // namespace

Status TrainingOptions::validate() const {
  if (nodes == 0 || nodes > coding::AllocationMatrix::kMaxNodes) {
    return bad_option("nodes must be in [1, " + std::to_string(coding::AllocationMatrix::kMaxNodes) + "]");
  }
  if (2 * byzantine >= nodes) {
    return bad_option("the fault budget b = " + std::to_string(byzantine) +
                      " needs b < n/2 (n = " + std::to_string(nodes) + ")");
  }
  if (partition_size == 0 || partition_size > kMaxPartitionSize)
    return bad_option("partition size must be in [1, 2^24], not " + std::to_string(partition_size));
  if (rounds == 0 || rounds > kMaxRounds)
    return bad_option("rounds must be in [1, 2^48], not " + std::to_string(rounds));
  if (digest_every == 0)
    return bad_option("digest_every must be at least 1 (1: the full parameter digest every round)");
  if (!(worker_momentum >= 0.0 && worker_momentum < 1.0)) return bad_option("worker momentum must be in [0, 1)");
  if (placement == Placement::kExchange && rule != "vote") {
    return bad_option("placement 'exchange' relays 1-bit partition signs through G: it needs rule 'vote' (rule '" +
                      rule + "' sends each node's own gradient to the server already)");
  }
  BALLOT_TRY(code_spec(*this));
  BALLOT_TRY(Spec::parse(model));
  BALLOT_TRY(learning::LrSchedule::parse(lr));
  BALLOT_TRY(Spec::parse(data));
  BALLOT_ASSIGN_OR_RETURN(auto adversary, attacks::AttackSpec::parse(attack));
  if (rule == "vote" && codec != TrainingOptions{}.codec) {
    // Without this a typo'd --rule, or a forgotten one, would train on 1-bit votes while the
    // user believes the codec is in use.
    return bad_option("codec '" + codec +
                      "' applies to the gradient path only: rule 'vote' sends 1-bit signs "
                      "through the election code (choose a robust rule, e.g. --rule median, to use a codec, or leave "
                      "the codec at fp32)");
  }
  if (rule != "vote") {
    BALLOT_ASSIGN_OR_RETURN(auto aggregator, robust::make_aggregator(rule));
    // The server decides with anything between n − b and n inputs: the rule must accept both.
    BALLOT_TRY(aggregator->check(nodes - byzantine));
    BALLOT_TRY(aggregator->check(nodes));
    BALLOT_TRY(coding::make_codec(codec));
    // DGC corrects momentum at the node (u ← m·u + g, sent from v ← v + u): a server rule with
    // momentum of its own would apply it a second time, which the paper's receiver does not.
    BALLOT_ASSIGN_OR_RETURN(const Spec codec_spec, Spec::parse(codec));
    BALLOT_ASSIGN_OR_RETURN(const Spec update_spec, Spec::parse(update));
    const std::string& rule_name = update_spec.name();
    BALLOT_ASSIGN_OR_RETURN(const double server_momentum,
                            rule_name == "signum"
                                ? update_spec.get_double("beta", 0.9)
                                : update_spec.get_double("momentum", rule_name == "heavyball" ? 0.9 : 0.0));
    const bool has_momentum =
        (rule_name == "sgd" || rule_name == "heavyball" || rule_name == "signum") && server_momentum > 0.0;
    BALLOT_ASSIGN_OR_RETURN(const double node_momentum,
                            codec_spec.get_double("momentum", coding::DgcOptions{}.momentum));
    if (codec_spec.name() == "dgc" && node_momentum > 0.0 && has_momentum) {
      return bad_option("codec '" + codec + "' corrects momentum at the node; update '" + update +
                        "' would apply momentum a second time: use update 'sgd' (momentum 0), as DGC's receiver "
                        "does, or dgc:momentum=0");
    }
    if (adversary.find(attacks::Domain::kSign) != nullptr) {
      return bad_option("attack '" + attack + "': sign-domain attacks act on 1-bit votes; with rule '" + rule +
                        "' use a gradient-domain attack (e.g. sign_flip instead of reverse)");
    }
  }
  if (attackers > nodes) return bad_option("more attackers than nodes");
  std::size_t attacking = attackers;
  if (attacker_choice != "random" && attacker_choice != "worst") {
    BALLOT_ASSIGN_OR_RETURN(auto indices, attacks::parse_indices(attacker_choice, nodes));
    if (attackers != 0 && indices.size() != attackers) {
      return bad_option("attacker_choice lists " + std::to_string(indices.size()) +
                        " nodes but attackers = " + std::to_string(attackers));
    }
    attacking = indices.size();
  }
  const auto* sign = adversary.find(attacks::Domain::kSign);
  const bool omniscient = adversary.find(attacks::Domain::kGradient) != nullptr ||
                          (sign != nullptr && sign->kind == attacks::AttackKind::kOmniscient);
  if (omniscient && attacking >= nodes) {
    return bad_option("attack '" + attack +
                      "' crafts its messages from the honest ones: at least one node must be honest");
  }
  return {};
}

Result<learning::TrainTestSplit> load_training_data(const TrainingOptions& options) {
  BALLOT_ASSIGN_OR_RETURN(Spec spec, Spec::parse(options.data));
  if (spec.name() == "fashion-mnist" || spec.name() == "mnist") {
    BALLOT_TRY(spec.check_known({"dir"}));
    const std::string dir = spec.get_string("dir", std::string(learning::kDefaultFashionMnistDir));
    return learning::load_mnist_dir(dir);
  }
  if (spec.name() == "synthetic") {
    BALLOT_TRY(spec.check_known({"examples", "features", "classes", "separation", "noise", "seed"}));
    learning::SyntheticOptions synthetic;
    BALLOT_ASSIGN_OR_RETURN(auto examples, spec.get_int("examples", 4096));
    BALLOT_ASSIGN_OR_RETURN(auto features, spec.get_int("features", 32));
    BALLOT_ASSIGN_OR_RETURN(auto classes, spec.get_int("classes", 10));
    BALLOT_ASSIGN_OR_RETURN(synthetic.separation, spec.get_double("separation", 1.5));
    BALLOT_ASSIGN_OR_RETURN(synthetic.noise, spec.get_double("noise", 1.0));
    BALLOT_ASSIGN_OR_RETURN(auto seed, spec.get_int("seed", static_cast<std::int64_t>(options.seed)));
    if (examples <= 0 || features <= 0 || classes <= 0) return bad_option("synthetic sizes must be positive");
    // At most 2^30 floats of examples (4 GiB), so that a typo is an error rather than an allocation failure.
    if (examples > (std::int64_t{1} << 28) || features > (std::int64_t{1} << 24) || classes > 256 ||
        examples * features > (std::int64_t{1} << 30))
      return bad_option("synthetic: examples ≤ 2^28, features ≤ 2^24, classes ≤ 256 and examples × features ≤ 2^30");
    synthetic.num_examples = static_cast<std::size_t>(examples);
    synthetic.num_features = static_cast<std::size_t>(features);
    synthetic.num_classes = static_cast<std::size_t>(classes);
    synthetic.seed = static_cast<std::uint64_t>(seed);
    learning::TrainTestSplit split;
    BALLOT_ASSIGN_OR_RETURN(split.train, learning::make_synthetic(synthetic));
    BALLOT_ASSIGN_OR_RETURN(split.test, learning::make_synthetic_test(synthetic, synthetic.num_examples / 4 + 1));
    return split;
  }
  if (spec.name() == "external") {
    // The examples live with the nodes' own framework (ballot.torch): Ballot samples the indices of
    // each round's partitions from the training set's size and never reads an example.
    BALLOT_TRY(spec.check_known({"train"}));
    BALLOT_ASSIGN_OR_RETURN(auto train, spec.get_int("train", 0));
    if (train <= 0 || train > (std::int64_t{1} << 28)) return bad_option("external:train=N needs N in 1..2^28");
    learning::TrainTestSplit split;
    split.train.labels.assign(static_cast<std::size_t>(train), 0);  // sizes only; no features
    return split;
  }
  return bad_option("unknown dataset '" + spec.name() + "' (known: fashion-mnist, mnist, synthetic, external)");
}

Result<coding::AllocationMatrix> make_code(const TrainingOptions& options) {
  BALLOT_ASSIGN_OR_RETURN(Spec spec, code_spec(options));
  return coding::make_allocation_matrix(spec, options.nodes, options.seed);
}

Result<std::vector<std::size_t>> choose_attackers(const TrainingOptions& options,
                                                  const coding::AllocationMatrix& code) {
  BALLOT_ASSIGN_OR_RETURN(auto attack, attacks::AttackSpec::parse(options.attack));
  if (attack.none()) return std::vector<std::size_t>{};
  return attacks::select_byzantine(options.attacker_choice, options.nodes, options.attackers, options.seed, &code);
}

Result<TrainingSetup> make_training_setup(const TrainingOptions& options,
                                          std::shared_ptr<const learning::TrainTestSplit> data) {
  BALLOT_TRY(options.validate());
  BALLOT_ENFORCE(data != nullptr);
  if (data->train.size() == 0) return bad_option("the training set is empty");
  BALLOT_ASSIGN_OR_RETURN(auto code, make_code(options));
  BALLOT_ASSIGN_OR_RETURN(auto schedule, learning::LrSchedule::parse(options.lr));
  learning::PartitionSampler sampler(learning::PartitionOptions{options.seed, options.partition_size},
                                     data->train.size());
  BALLOT_ASSIGN_OR_RETURN(auto attack, attacks::AttackSpec::parse(options.attack));
  BALLOT_ASSIGN_OR_RETURN(auto byzantine, choose_attackers(options, code));
  return TrainingSetup{options,           std::move(data),     std::move(code), std::move(sampler), std::move(schedule),
                       std::move(attack), std::move(byzantine)};
}

bool TrainingSetup::is_byzantine(std::size_t node) const {
  return std::binary_search(byzantine.begin(), byzantine.end(), node);
}

const attacks::Behaviour* TrainingSetup::active(attacks::Domain domain, std::uint64_t round) const {
  const attacks::Behaviour* behaviour = attack.find(domain);
  return behaviour != nullptr && behaviour->active(round) ? behaviour : nullptr;
}

Result<transport::FrameLimits> frame_limits(const TrainingSetup& setup) {
  BALLOT_ASSIGN_OR_RETURN(
      auto model, learning::make_model(setup.options.model, learning::shape_of(setup.data->train), setup.options.seed));
  std::size_t codec_bytes = 0;
  if (!setup.sign_vote()) {
    BALLOT_ASSIGN_OR_RETURN(auto codec, coding::make_codec(setup.options.codec));
    codec_bytes = codec->wire_size(model->layout());
  }
  return round_frame_limits(model->parameters().size(), codec_bytes, setup.sign_vote(), setup.options.nodes);
}

Result<Replica> Replica::create(const TrainingSetup& setup) {
  BALLOT_ASSIGN_OR_RETURN(
      auto model, learning::make_model(setup.options.model, learning::shape_of(setup.data->train), setup.options.seed));
  BALLOT_ASSIGN_OR_RETURN(auto optimizer, learning::make_optimizer(setup.options.update, model->layout()));
  return Replica(std::move(model), std::move(optimizer), setup.schedule, setup.options.digest_every);
}

namespace {
transport::Digest parameters_digest(std::span<const float> params) {
  return transport::payload_digest({reinterpret_cast<const std::uint8_t*>(params.data()), params.size_bytes()});
}
constexpr std::string_view kStateDigestLabel = "ballot.state.v1";
constexpr std::string_view kStateDigestSection = "state_digest";
}  // namespace

Replica::Replica(std::unique_ptr<learning::Model> model, std::unique_ptr<learning::Optimizer> optimizer,
                 learning::LrSchedule schedule, std::uint64_t digest_every)
    : model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      schedule_(std::move(schedule)),
      digest_every_(std::max<std::uint64_t>(1, digest_every)),
      state_digest_(parameters_digest(model_->parameters())) {}

void Replica::advance_state_digest(std::uint64_t round, learning::StepScale scale, bool full_digest,
                                   const std::function<transport::Digest()>& decision_digest) {
  if (full_digest) {
    state_digest_ = parameters_digest(model_->parameters());
    return;
  }
  ByteWriter chain;
  chain.put_bytes({reinterpret_cast<const std::uint8_t*>(kStateDigestLabel.data()), kStateDigestLabel.size()});
  chain.put_bytes(state_digest_);
  chain.put<std::uint64_t>(round);
  chain.put<std::uint32_t>(std::bit_cast<std::uint32_t>(scale.lr));
  chain.put<std::uint32_t>(std::bit_cast<std::uint32_t>(scale.weight_decay));
  chain.put_bytes(decision_digest());
  state_digest_ = transport::sha256(chain.bytes());
}

void Replica::apply(std::uint64_t round, const BitVector& decision, learning::StepScale scale, bool full_digest) {
  optimizer_->step_vote(model_->parameters(), decision, scale);
  advance_state_digest(round, scale, full_digest, [&] {
    const auto words = decision.words();
    return transport::payload_digest({reinterpret_cast<const std::uint8_t*>(words.data()), words.size_bytes()});
  });
  if (vote_observer_) vote_observer_(round, decision, scale, full_digest);
}

void Replica::apply(std::uint64_t round, std::span<const float> direction, learning::StepScale scale,
                    bool full_digest) {
  optimizer_->step(model_->parameters(), direction, scale);
  advance_state_digest(round, scale, full_digest, [&] { return direction_digest(direction); });
}

void Replica::apply(std::uint64_t round, std::span<const float> direction, learning::StepScale scale, bool full_digest,
                    std::span<const std::uint8_t> float_decision) {
  optimizer_->step(model_->parameters(), direction, scale);
  advance_state_digest(round, scale, full_digest, [&] { return direction_digest_of_decision(float_decision); });
}

Status Replica::apply_decision(std::uint64_t round, std::span<const std::uint8_t> payload, bool sign_vote,
                               AppliedDirection* applied) {
  const auto wrong_round = [&](std::uint64_t got) {
    return make_error(ErrorCode::kMalformed,
                      "decision of round " + std::to_string(got) + " given for round " + std::to_string(round));
  };
  if (sign_vote) {
    BALLOT_ASSIGN_OR_RETURN(auto decision, decode_decision(payload, dimension()));
    if (decision.round != round) return wrong_round(decision.round);
    apply(round, decision.signs, decision.scale, decision.full_digest);
    return {};
  }
  std::optional<coding::SparseGradient> listed;
  std::vector<float> storage;
  if (applied != nullptr) {
    storage = std::move(applied->direction);
    *applied = {};  // nothing, unless applied
  }
  BALLOT_ASSIGN_OR_RETURN(
      auto decision,
      decode_float_decision(payload, dimension(), applied != nullptr ? &listed : nullptr, std::move(storage)));
  if (decision.round != round) {
    if (applied != nullptr) applied->direction = std::move(decision.direction);  // its memory, for the next one
    return wrong_round(decision.round);
  }
  apply(round, std::span<const float>(decision.direction), decision.scale, decision.full_digest, payload);
  if (applied != nullptr) {
    applied->direction = std::move(decision.direction);
    applied->listed = std::move(listed);
  }
  return {};
}

transport::Digest Replica::digest() const {
  const auto params = model_->parameters();
  return transport::sha256({reinterpret_cast<const std::uint8_t*>(params.data()), params.size_bytes()});
}

learning::Evaluation Replica::evaluate(const learning::Dataset& data, std::size_t max_examples) const {
  if (!model_->has_forward() || data.size() == 0 || max_examples == 0) return {};
  // evaluate() needs a mutable model for its scratch buffers; a clone keeps this const.
  auto copy = model_->clone();
  if (max_examples >= data.size()) return learning::evaluate(*copy, data);
  learning::Dataset head;
  head.num_features = data.num_features;
  head.num_classes = data.num_classes;
  head.rows = data.rows;
  head.cols = data.cols;
  head.channels = data.channels;
  head.features.assign(data.features.begin(),
                       data.features.begin() + static_cast<std::ptrdiff_t>(max_examples * data.num_features));
  head.labels.assign(data.labels.begin(), data.labels.begin() + static_cast<std::ptrdiff_t>(max_examples));
  return learning::evaluate(*copy, head);
}

void Replica::save_to(Checkpoint& checkpoint) const {
  checkpoint.sections["model"] = float_bytes(model_->parameters());
  checkpoint.sections["optimizer"] = optimizer_->save_state();
  checkpoint.sections[std::string(kStateDigestSection)].assign(state_digest_.begin(), state_digest_.end());
}

Status Replica::restore_from(const Checkpoint& checkpoint) {
  const auto model = checkpoint.sections.find("model");
  const auto optimizer = checkpoint.sections.find("optimizer");
  if (model == checkpoint.sections.end() || optimizer == checkpoint.sections.end()) {
    return make_error(ErrorCode::kMalformed, "checkpoint lacks the model or optimizer section");
  }
  auto params = model_->parameters();
  if (model->second.size() != params.size_bytes()) {
    return make_error(ErrorCode::kMalformed, "checkpoint model has " + std::to_string(model->second.size()) +
                                                 " bytes, this model needs " + std::to_string(params.size_bytes()));
  }
  const auto state = checkpoint.sections.find(std::string(kStateDigestSection));
  if (state != checkpoint.sections.end() && state->second.size() != state_digest_.size()) {
    return make_error(ErrorCode::kMalformed, "checkpoint state digest has " + std::to_string(state->second.size()) +
                                                 " bytes, not " + std::to_string(state_digest_.size()));
  }
  BALLOT_TRY(optimizer_->load_state(optimizer->second, params.size()));
  std::memcpy(params.data(), model->second.data(), params.size_bytes());
  // A checkpoint written before state digests existed anchors the chain at its parameters.
  if (state == checkpoint.sections.end()) {
    state_digest_ = parameters_digest(params);
  } else {
    std::copy(state->second.begin(), state->second.end(), state_digest_.begin());
  }
  return {};
}

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

Rng codec_rng(const TrainingSetup& setup, std::uint64_t round, std::size_t node) {
  constexpr std::uint64_t kCodecPurpose = 0x636f646563000000ULL;  // "codec": stochastic codecs' noise
  return Rng(setup.options.seed, Rng::stream_id({round, node, kCodecPurpose}));
}

BitVector decide(std::span<const BitVector* const> votes, std::size_t dimension) {
  BitVector decision(dimension, true);
  if (!votes.empty()) kernels::majority_vote(votes, decision);
  return decision;
}

}  // namespace ballot::runtime
