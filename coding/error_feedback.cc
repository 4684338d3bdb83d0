#include "coding/error_feedback.h"

#include <cmath>

#include "coding/wire_format.h"
#include "core/enforce.h"

namespace ballot::coding {

ErrorFeedback::ErrorFeedback(std::unique_ptr<Codec> inner) : inner_(std::move(inner)) {
  BALLOT_ENFORCE(inner_ != nullptr, "ErrorFeedback needs a codec");
}

std::string ErrorFeedback::spec() const {
  std::string text = inner_->spec();
  // A codec whose error feedback is on by default prints ef=0 when bare (onebit).
  if (const auto off = text.find("ef=0"); off != std::string::npos) return text.replace(off, 4, "ef=1");
  text += text.find(':') == std::string::npos ? ":ef=1" : ",ef=1";
  return text;
}

EncodedGradient ErrorFeedback::encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) {
  BALLOT_ENFORCE_EQ(gradient.size(), layout.total_size());
  const std::size_t d = gradient.size();
  if (memory_.size() != d) memory_.assign(d, 0.0f);
  corrected_.resize(d);
  for (std::size_t i = 0; i < d; ++i) corrected_[i] = gradient[i] + memory_[i];  // p = g + e
  EncodedGradient out = inner_->encode(corrected_, layout, rng);                 // Δ = C(p)
  // e = p - Δ, with Δ exactly as every receiver decodes it.
  memory_.swap(corrected_);
  const Status status = inner_->decode_add(out.bytes, layout, memory_, -1.0f);
  BALLOT_ENFORCE(status.ok(), "a codec failed to decode its own message: " +
                                  (status.ok() ? std::string() : status.error().to_string()));
  // A non-finite input went out in this message (for the aggregation to reject); it must not stay
  // in the memory, where it would make every later message non-finite.
  for (float& e : memory_) e = std::isfinite(e) ? e : 0.0f;
  return out;
}

std::vector<std::uint8_t> ErrorFeedback::save_state() const { return write_state(id(), memory_, inner_->save_state()); }

Status ErrorFeedback::load_state(std::span<const std::uint8_t> state, const GradientLayout& layout) {
  BALLOT_ASSIGN_OR_RETURN(StateView view, read_state(state, id(), layout));
  BALLOT_TRY(inner_->load_state(view.inner, layout));
  memory_ = std::move(view.memory);
  return {};
}

void ErrorFeedback::reset_state() {
  memory_.clear();
  inner_->reset_state();
}

}  // namespace ballot::coding
