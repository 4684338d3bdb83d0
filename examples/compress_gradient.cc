// Example: gradient compression codecs by name (ballot::coding), with the library API alone.
// A two-layer gradient goes through several codecs of the registry: the wire size against fp32,
// the relative error of one decoded message, and the error of the average of many messages (an
// unbiased codec's average converges to the gradient as 1/√messages; a biased one's does not, and
// plain sign carries no magnitude at all). Then the bytes are damaged the way a hostile peer might:
// decode returns an error and never reads out of range.
// Exit status 0 iff every damaged message is rejected and every average behaves as its codec's
// bias says: an unbiased codec's average of 200 within 0.2× the error of one message (1/√200 ≈
// 0.07), any other codec's above 0.5× it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "coding/codec_registry.h"
#include "core/gradient_layout.h"
#include "core/rng.h"

namespace {

double relative_error(const std::vector<float>& approx, const std::vector<float>& exact) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    diff += (approx[i] - exact[i]) * (approx[i] - exact[i]);
    norm += exact[i] * exact[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace

int main() {
  using namespace ballot;
  auto layout = GradientLayout::from_sizes({{"conv", 4096}, {"fc", 60000}});
  if (!layout.ok()) return 2;
  Rng rng(11);
  std::vector<float> gradient(layout->total_size());
  for (auto& g : gradient) g = static_cast<float>(0.01 * rng.normal());

  constexpr int kMessages = 200;
  bool all_rejected = true;
  bool averages_as_claimed = true;
  std::printf("%-28s %10s %8s %12s %20s\n", "codec", "wire bytes", "ratio", "error of 1", "error of mean of 200");
  for (const char* spec : {"fp16", "sign", "scaled_sign", "topk:ratio=0.01", "randomk:ratio=0.1", "qsgd:s=16",
                           "terngrad", "qsgd:s=4,elias=1"}) {
    auto codec = coding::make_codec(spec);
    if (!codec.ok()) return std::fprintf(stderr, "%s\n", codec.error().to_string().c_str()), 2;
    std::vector<float> sum(gradient.size(), 0.0f);
    std::vector<std::uint8_t> first;
    for (int m = 0; m < kMessages; ++m) {
      auto encoded = (*codec)->encode(gradient, *layout, rng);
      if (m == 0) first = encoded.bytes;
      // decode_add accumulates without materialising the decoded vector.
      if (auto status = (*codec)->decode_add(encoded.view(), *layout, sum, 1.0f / kMessages); !status.ok()) return 2;
    }
    auto one = (*codec)->decode(first, *layout);
    if (!one.ok()) return 2;
    const double error_of_one = relative_error(*one, gradient);
    const double error_of_mean = relative_error(sum, gradient);
    std::printf("%-28s %10zu %7.1fx %12.3f %20.3f\n", spec, first.size(),
                static_cast<double>(gradient.size() * sizeof(float)) / static_cast<double>(first.size()), error_of_one,
                error_of_mean);
    // The registry's own property decides which claim applies, so a codec added to the list is
    // judged by what it is. The deterministic codecs here send the same bytes every time: their
    // average is one message, up to the rounding of the sum.
    const auto* entry = coding::find_codec((*codec)->id());
    const bool unbiased = entry != nullptr && entry->properties.unbiased;
    if (unbiased ? !(error_of_mean < 0.2 * error_of_one) : !(error_of_mean > 0.5 * error_of_one)) {
      averages_as_claimed = false;
      std::printf("  the average of %d messages %s\n", kMessages,
                  unbiased ? "did not converge, yet the codec is unbiased" : "converged, yet the codec is biased");
    }

    // A hostile peer: the message cut short, and the header's d (bytes 8..15, coding/wire_format.h)
    // inflated to 2^64 − 1. The granularity and flag bytes stay valid, so that what rejects it is
    // the receiver's check of d against its own layout.
    std::vector<std::uint8_t> truncated(first.begin(), first.end() - 1);
    std::vector<std::uint8_t> inflated = first;
    for (std::size_t i = 8; i < 16 && i < inflated.size(); ++i) inflated[i] = 0xff;
    for (const auto* damaged : {&truncated, &inflated}) {
      auto decoded = (*codec)->decode(*damaged, *layout);
      if (decoded.ok()) {
        all_rejected = false;
        std::printf("  %s message accepted!\n", damaged == &truncated ? "truncated" : "inflated");
      } else {
        std::printf("  %s -> %s\n", damaged == &truncated ? "truncated by one byte" : "d inflated to 2^64 - 1",
                    decoded.error().to_string().c_str());
      }
    }
  }
  return all_rejected && averages_as_claimed ? 0 : 1;
}
