#include "runtime/replica.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/byte_io.h"
#include "core/enforce.h"
#include "kernels/majority_vote.h"
#include "learning/models.h"
#include "runtime/messages.h"

namespace ballot::runtime {

Result<Replica> Replica::create(const TrainingSetup& setup) {
  BALLOT_ASSIGN_OR_RETURN(
      auto model, learning::make_model(setup.options.model, learning::shape_of(setup.data->train), setup.options.seed));
  BALLOT_ASSIGN_OR_RETURN(auto optimizer, learning::make_optimizer(setup.options.update, model->layout()));
  return Replica(std::move(model), std::move(optimizer), setup.schedule, setup.options.digest_every);
}

namespace {
std::vector<std::uint8_t> float_bytes(std::span<const float> values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

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

BitVector decide(std::span<const BitVector* const> votes, std::size_t dimension) {
  BitVector decision(dimension, true);
  if (!votes.empty()) kernels::majority_vote(votes, decision);
  return decision;
}

}  // namespace ballot::runtime
