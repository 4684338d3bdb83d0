// One copy of the model and its server-side optimizer. Every participant (server and nodes) holds
// one and applies the same decision v_r each round, so all replicas stay bit-identical (checked
// through digest() and the O(1) state_digest()). The server's decision from the votes: decide().

// Thread-safety: none; one object per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "coding/codec.h"
#include "core/bit_vector.h"
#include "core/result.h"
#include "learning/dataset.h"
#include "learning/model.h"
#include "learning/optimizer.h"
#include "runtime/checkpoint.h"
#include "runtime/training.h"
#include "transport/crypto.h"

namespace ballot::runtime {

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

// The server's decision from the votes it holds (absent nodes are skipped): the majority, ties
// to +1 (coding::decode). With no vote at all the decision is all +1 — callers never apply a
// round without quorum.
BitVector decide(std::span<const BitVector* const> votes, std::size_t dimension);

}  // namespace ballot::runtime
