// ErrorFeedback: turns any codec C into its error-feedback version (Karimireddy et al., ICML 2019,
// Alg. 2; ALGORITHMS.md §2):
//   p = g + e;  Δ = C(p) (what is sent);  e <- p - decode(Δ)
// The caller passes g already scaled by the step size if it wants the paper's p = η·g + e (for a
// constant η and a positively homogeneous C — every codec here except threshold — scaling the
// decoded Δ by η afterwards is the same). The memory e is node state: save_state() stores it with
// the wrapped codec's own state, load_state() restores both, so a checkpoint keeps it.
// Messages are the wrapped codec's: any peer decodes them without knowing about the memory. An
// entry of e that is not finite (a non-finite input, sent in this round's message) is set to 0.
// The registry refuses ef=1 over the unbiased codecs (randomk, qsgd, terngrad), which are not
// contractive: e grows without bound over them; this class itself wraps any codec.
// Cost: encode = C's encode + one decode_add into e + two O(d) passes. Not thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "coding/codec.h"

namespace ballot::coding {

class ErrorFeedback final : public Codec {
 public:
  explicit ErrorFeedback(std::unique_ptr<Codec> inner);

  CodecId id() const noexcept override { return inner_->id(); }
  std::string spec() const override;  // the inner spec with ",ef=1"
  Granularity granularity() const noexcept override { return inner_->granularity(); }
  EncodedGradient encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) override;
  Status decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout, std::span<float> accumulator,
                    float weight = 1.0f) const override {
    return inner_->decode_add(bytes, layout, accumulator, weight);
  }
  bool sparse_decode() const noexcept override { return inner_->sparse_decode(); }
  Result<SparseGradient> decode_entries(std::span<const std::uint8_t> bytes,
                                        const GradientLayout& layout) const override {
    return inner_->decode_entries(bytes, layout);
  }
  std::size_t wire_size(const GradientLayout& layout) const override { return inner_->wire_size(layout); }
  using Codec::wire_size;
  bool exact_wire_size() const noexcept override { return inner_->exact_wire_size(); }

  bool stateful() const noexcept override { return true; }
  std::vector<std::uint8_t> save_state() const override;
  Status load_state(std::span<const std::uint8_t> state, const GradientLayout& layout) override;
  void reset_state() override;

  std::span<const float> memory() const noexcept { return memory_; }
  Codec& inner() noexcept { return *inner_; }
  const Codec& inner() const noexcept { return *inner_; }

 private:
  std::unique_ptr<Codec> inner_;
  std::vector<float> memory_;
  std::vector<float> corrected_;  // p, reused between calls
};

}  // namespace ballot::coding
