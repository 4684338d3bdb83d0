// Fuzz target: IDX files (learning/dataset.h parse_idx), the on-disk format of MNIST and
// Fashion-MNIST. Invariants: nothing crashes, reads out of bounds or allocates past the limit;
// an accepted array has as many bytes as the product of its dimensions, at most the limit.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "learning/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ballot::learning::IdxLimits limits;
  limits.max_bytes = std::size_t{1} << 20;  // a fuzzer's header may claim gigabytes
  const auto parsed = ballot::learning::parse_idx(std::span<const std::uint8_t>(data, size), "fuzz input", limits);
  if (!parsed.ok()) return 0;
  std::size_t product = 1;
  for (auto dim : parsed->dims) product *= dim;
  if (parsed->dims.empty() || parsed->dims.size() > limits.max_dims || parsed->data.size() != product ||
      product > limits.max_bytes) {
    std::abort();
  }
  return 0;
}
