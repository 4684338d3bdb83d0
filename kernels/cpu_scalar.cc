// The scalar reference kernels: every other ISA level must match these bit for bit.
#include <bit>
#include <cstring>

#include "kernels/detail/bitsliced_vote.h"
#include "kernels/detail/cpu_kernels.h"
#include "kernels/detail/update_loops.h"
#include "kernels/sign_logic.h"

namespace ballot::kernels::detail {
namespace {

void pack_scalar(const float* values, std::size_t count, std::uint64_t* words) {
  const std::size_t full = count / 64;
  for (std::size_t w = 0; w < full; ++w) {
    std::uint64_t word = 0;
    for (int k = 0; k < 64; ++k) {
      word |= static_cast<std::uint64_t>(sign_bit(values[64 * w + k])) << k;
    }
    words[w] = word;
  }
  if (const std::size_t tail = count % 64; tail != 0) {
    std::uint64_t word = 0;
    for (std::size_t k = 0; k < tail; ++k) {
      word |= static_cast<std::uint64_t>(sign_bit(values[64 * full + k])) << k;
    }
    words[full] = word;
  }
}

void unpack_scalar(const std::uint64_t* words, std::size_t first_bit, std::size_t count, float negative, float positive,
                   float* out) {
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t bit = first_bit + i;
    out[i] = ((words[bit / 64] >> (bit % 64)) & 1u) ? positive : negative;
  }
}

std::size_t agree_scalar(const std::uint64_t* a, const std::uint64_t* b, std::size_t bits) {
  std::size_t equal = 0;
  const std::size_t full = bits / 64;
  for (std::size_t w = 0; w < full; ++w) equal += std::popcount(~(a[w] ^ b[w]));
  if (const std::size_t tail = bits % 64; tail != 0) {
    const std::uint64_t mask = (std::uint64_t{1} << tail) - 1;
    equal += std::popcount(~(a[full] ^ b[full]) & mask);
  }
  return equal;
}

inline std::uint32_t bits_of(const float* x) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, x, 4);
  return bits;
}

// Blocks of 16 are tested at once (their words OR-ed); only a block holding an entry is looked at
// one by one.
std::size_t entries_scalar(const float* x, std::size_t begin, std::size_t end, std::uint32_t* dst) {
  constexpr std::size_t kBlock = 16;
  std::size_t count = 0, i = begin;
  for (; i + kBlock <= end; i += kBlock) {
    std::uint32_t any = 0;
    for (std::size_t j = 0; j < kBlock; ++j) any |= bits_of(x + i + j);
    if (any == 0) continue;
    for (std::size_t j = i; j < i + kBlock; ++j) {
      dst[count] = static_cast<std::uint32_t>(j);
      count += bits_of(x + j) != 0;
    }
  }
  for (; i < end; ++i) {
    dst[count] = static_cast<std::uint32_t>(i);
    count += bits_of(x + i) != 0;
  }
  return count;
}

std::size_t count_entries_scalar(const float* x, std::size_t n) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < n; ++i) count += bits_of(x + i) != 0;
  return count;
}

// The update loops: four lanes of the baseline ISA (SSE2 on x86-64, NEON on AArch64) up to the
// last whole 64 coordinates, then float by float; each lane is the float step (update_logic.h).
void momentum_scalar(float* m, const float* g, std::size_t count, float keep, float mix) {
  const std::size_t vectors = count / 64 * 64;
  momentum_vectors<4>(m, g, vectors, keep, mix);
  for (std::size_t i = vectors; i < count; ++i) m[i] = momentum_step(m[i], g[i], keep, mix);
}

void update_scalar(float* x, float* buffer, const float* g, const std::uint64_t* signs, std::size_t count,
                   const SgdFactors& f, bool first_step) {
  const std::size_t vectors = count / 64 * 64;
  update_vectors<4>(x, buffer, g, signs, vectors, f, first_step);
  for (std::size_t i = vectors; i < count; ++i) {
    const float v = signs == nullptr ? g[i] : ((signs[i / 64] >> (i % 64)) & 1u) != 0 ? 1.0f : -1.0f;
    if (f.momentum != 0.0f) {
      momentum_sgd_step(x[i], buffer[i], v, f, first_step);
    } else {
      x[i] = decayed_step(x[i], v, f.lr, f.weight_decay);
    }
  }
}

}  // namespace

const CpuKernels kScalarKernels{Isa::kScalar,  &pack_scalar,    &unpack_scalar,        &bitsliced_vote<std::uint64_t>,
                                &agree_scalar, &entries_scalar, &count_entries_scalar, &momentum_scalar,
                                &update_scalar};

}  // namespace ballot::kernels::detail
