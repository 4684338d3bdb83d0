// Batched uniforms from the Philox stream of an Rng, for the stochastic-rounding codecs.
//
// fill_uniform(seed, stream, start, out) writes out[i] = philox_unit_float(philox_stream_word(
// seed, stream, start + i)): exactly the values `out.size()` calls of Rng::uniform_float() return
// from position `start`, so a codec's randomness is defined by core/philox.h (and reproducible on
// the GPU), only computed 16 Philox blocks at a time with AVX-512 when the CPU has it.
// Bit-identical on every ISA level (kernels::set_isa_limit caps the level, for tests).
#pragma once

#include <cstdint>
#include <span>

#include "core/rng.h"

namespace ballot::coding::detail {

void fill_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t start,
                  std::span<float> out);

// A window of the stream that a codec consumes `count` words of: it starts at the Rng's position,
// and the Rng is moved past it at construction.
struct UniformStream {
  UniformStream(Rng& rng, std::uint64_t count)
      : seed(rng.seed()), stream(rng.stream()), start(rng.position()) {
    rng.seek(start + count);
  }
  void fill(std::uint64_t offset, std::span<float> out) const {
    fill_uniform(seed, stream, start + offset, out);
  }
  std::uint64_t seed, stream, start;
};

}  // namespace ballot::coding::detail
