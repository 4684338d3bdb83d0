#include "core/float_entries.h"

#include <cstring>

#include "core/enforce.h"

namespace ballot {
namespace {

constexpr std::size_t kBlock = 16;

// The OR of a block's 16 words: 0 iff the block holds no entry. Written so that the compiler makes
// it a vector OR of the whole block at each target.
inline std::uint32_t block_bits(const float* x) {
  std::uint32_t words[kBlock];
  std::memcpy(words, x, sizeof(words));
  std::uint32_t any = 0;
  for (std::size_t j = 0; j < kBlock; ++j) any |= words[j];
  return any;
}

inline bool is_entry(float v) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &v, 4);
  return bits != 0;
}

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) void append_entries(std::span<const float> x,
                                                                                 std::vector<std::uint32_t>& out) {
  BALLOT_ENFORCE_LE(x.size(), std::size_t{1} << 32);
  const float* data = x.data();
  const std::size_t n = x.size();
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    if (block_bits(data + i) == 0) continue;
    for (std::size_t j = i; j < i + kBlock; ++j)
      if (is_entry(data[j])) out.push_back(static_cast<std::uint32_t>(j));
  }
  for (; i < n; ++i)
    if (is_entry(data[i])) out.push_back(static_cast<std::uint32_t>(i));
}

__attribute__((target_clones("avx512f", "avx2", "default"))) std::size_t count_entries(std::span<const float> x) {
  const float* data = x.data();
  const std::size_t n = x.size();
  std::size_t count = 0, i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    if (block_bits(data + i) == 0) continue;
    for (std::size_t j = i; j < i + kBlock; ++j) count += is_entry(data[j]);
  }
  for (; i < n; ++i) count += is_entry(data[i]);
  return count;
}

}  // namespace ballot
