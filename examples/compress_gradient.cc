// Example: gradient compression codecs by name (ballot::coding), with the library API alone.
// A two-layer gradient goes through several codecs of the registry: the wire size against fp32,
// the relative error of one decoded message, and the error of the average of many messages (an
// unbiased codec's average converges to the gradient as 1/√messages; a biased one's does not, and
// plain sign carries no magnitude at all). Then the bytes
// are damaged the way a hostile peer might: decode returns an error and never reads out of range.
// Exit status 0 iff every damaged message is rejected.
#include <cmath>
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
    std::printf("%-28s %10zu %7.1fx %12.3f %20.3f\n", spec, first.size(),
                static_cast<double>(gradient.size() * sizeof(float)) / static_cast<double>(first.size()),
                relative_error(*one, gradient), relative_error(sum, gradient));

    // A hostile peer: the message cut short, and a length field inflated.
    std::vector<std::uint8_t> truncated(first.begin(), first.end() - 1);
    std::vector<std::uint8_t> inflated = first;
    for (std::size_t i = 4; i < 12 && i < inflated.size(); ++i) inflated[i] = 0xff;
    for (const auto* damaged : {&truncated, &inflated}) {
      auto decoded = (*codec)->decode(*damaged, *layout);
      if (decoded.ok()) {
        all_rejected = false;
        std::printf("  damaged message accepted!\n");
      } else if (damaged == &truncated) {
        std::printf("  truncated by one byte -> %s\n", decoded.error().to_string().c_str());
      }
    }
  }
  return all_rejected ? 0 : 1;
}
