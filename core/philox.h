// Philox4x32-10, the counter-based generator of Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3" (SC 2011), as in Random123 and cuRAND. Output = bijection(counter, key): any
// process, thread or GPU thread computes block i of a stream directly, so a cluster agrees on
// every random choice given only the seed. Header-only, shared by CPU and CUDA code.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace ballot {

struct PhiloxBlock {
  std::uint32_t v[4];
};

namespace detail {
BALLOT_HOST_DEVICE inline void philox_mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t product = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(product >> 32);
  lo = static_cast<std::uint32_t>(product);
}
}  // namespace detail

// counter: 128 bits as four 32-bit words (word 0 least significant); key: 64 bits.
BALLOT_HOST_DEVICE inline PhiloxBlock philox4x32_10(PhiloxBlock counter, std::uint32_t key0, std::uint32_t key1) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  std::uint32_t* c = counter.v;
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    detail::philox_mulhilo(kMul0, c[0], hi0, lo0);
    detail::philox_mulhilo(kMul1, c[2], hi1, lo1);
    const PhiloxBlock next{{hi1 ^ c[1] ^ key0, lo1, hi0 ^ c[3] ^ key1, lo0}};
    counter = next;
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return counter;
}

// Block `block` of the stream (seed, stream): Philox with counter = (block, stream), key = seed.
BALLOT_HOST_DEVICE inline PhiloxBlock philox_stream_block(std::uint64_t seed, std::uint64_t stream,
                                                          std::uint64_t block) {
  const PhiloxBlock counter{{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                             static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)}};
  return philox4x32_10(counter, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

// Word `index` (0-based) of the stream (seed, stream): word index%4 of block index/4.
BALLOT_HOST_DEVICE inline std::uint32_t philox_stream_word(std::uint64_t seed, std::uint64_t stream,
                                                           std::uint64_t index) {
  return philox_stream_block(seed, stream, index >> 2).v[index & 3];
}

// A uniform float in [0, 1) from the top 24 bits of a word: exactly representable, so CPU and GPU
// produce the same value.
BALLOT_HOST_DEVICE inline float philox_unit_float(std::uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

}  // namespace ballot
