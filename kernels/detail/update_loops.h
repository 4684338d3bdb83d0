// Internal: the update rules' loops (kernels/update.h, kernels/momentum.h), generic over the
// vector width: `Lanes` floats at a time in GCC's vector extension, through the per-coordinate
// steps of kernels/update_logic.h. Included by each ISA's translation unit and instantiated there
// with that unit's width only; the scalar unit does the tails.
//
// Vector multiplies and adds are per-lane IEEE float32 operations rounded to nearest, and every
// Ballot target compiles with -ffp-contract=off, so each width gives the scalar step's bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/detail/cpu_kernels.h"
#include "kernels/update_logic.h"

namespace ballot::kernels::detail {
// Internal linkage: each ISA unit that includes this gets its own copies, so the linker can never
// hand one unit's wide-instruction code to another's callers (detail/cpu_kernels.h).
namespace {

// The vector types of a width (GCC drops a vector_size that depends on a template parameter).
template <int Lanes>
struct LaneTypes;
template <>
struct LaneTypes<4> {
  using Floats = float __attribute__((vector_size(16)));
  using Ints = std::int32_t __attribute__((vector_size(16)));
};
template <>
struct LaneTypes<8> {
  using Floats = float __attribute__((vector_size(32)));
  using Ints = std::int32_t __attribute__((vector_size(32)));
};
template <>
struct LaneTypes<16> {
  using Floats = float __attribute__((vector_size(64)));
  using Ints = std::int32_t __attribute__((vector_size(64)));
};

template <int Lanes>
struct FloatLanes {
  using Floats = typename LaneTypes<Lanes>::Floats;
  using Ints = typename LaneTypes<Lanes>::Ints;

  static Floats load(const float* p) {
    Floats v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(float* p, Floats v) { std::memcpy(p, &v, sizeof v); }

  // Lane k holds 1 << k.
  static Ints lane_bits() {
    Ints bits{};
    for (int k = 0; k < Lanes; ++k) bits[k] = static_cast<std::int32_t>(1u << k);
    return bits;
  }
  // The votes of coordinates [i, i + Lanes) as ±1 floats (bit 1 → +1.0f, 0 → −1.0f), i a multiple
  // of Lanes: a lane's set bit turns −1.0f (0xbf800000) into +1.0f by clearing the sign bit.
  static Floats signs_at(const std::uint64_t* words, std::size_t i, Ints bits) {
    const auto chunk = static_cast<std::int32_t>((words[i / 64] >> (i % 64)) & ((std::uint64_t{1} << Lanes) - 1));
    const Ints set = ((Ints{} + chunk) & bits) != 0;  // all ones where set
    const Ints minus_one = Ints{} + static_cast<std::int32_t>(0xbf800000u);
    Floats v;
    const Ints pattern = minus_one ^ (set & static_cast<std::int32_t>(0x80000000u));
    std::memcpy(&v, &pattern, sizeof v);
    return v;
  }
};

// m[i] ← keep·m[i] + mix·g[i] for i < count. The SIMD units pass count rounded down to a
// multiple of 64 and leave the rest to the scalar unit's entry (detail/cpu_kernels.h: no float
// function may be instantiated with their flags).
template <int Lanes>
void momentum_vectors(float* m, const float* g, std::size_t count, float keep, float mix) {
  using L = FloatLanes<Lanes>;
  for (std::size_t i = 0; i + Lanes <= count; i += Lanes) {
    L::store(m + i, momentum_step(L::load(m + i), L::load(g + i), keep, mix));
  }
}

// One of the update rules over x[0, count) (kernels/update.h), count a multiple of Lanes: the
// direction is bit i of `signs` (±1) when Vote, else g[i]; with Momentum, SGD with momentum
// over buffer, else x ← x − η(v + λx).
template <int Lanes, bool Vote, bool Momentum>
void update_vectors(float* x, float* buffer, const float* g, const std::uint64_t* signs, std::size_t count,
                    const SgdFactors& f, bool first_step) {
  using L = FloatLanes<Lanes>;
  const auto bits = L::lane_bits();
  for (std::size_t i = 0; i + Lanes <= count; i += Lanes) {
    auto xv = L::load(x + i);
    const auto v = Vote ? L::signs_at(signs, i, bits) : L::load(g + i);
    if constexpr (Momentum) {
      auto bv = L::load(buffer + i);
      momentum_sgd_step(xv, bv, v, f, first_step);
      L::store(buffer + i, bv);
    } else {
      xv = decayed_step(xv, v, f.lr, f.weight_decay);
    }
    L::store(x + i, xv);
  }
}

// The four loops of one width; count a multiple of Lanes.
template <int Lanes>
void update_vectors(float* x, float* buffer, const float* g, const std::uint64_t* signs, std::size_t count,
                    const SgdFactors& f, bool first_step) {
  const bool vote = signs != nullptr, momentum = f.momentum != 0.0f;
  if (vote && momentum) return update_vectors<Lanes, true, true>(x, buffer, g, signs, count, f, first_step);
  if (vote) return update_vectors<Lanes, true, false>(x, buffer, g, signs, count, f, first_step);
  if (momentum) return update_vectors<Lanes, false, true>(x, buffer, g, signs, count, f, first_step);
  update_vectors<Lanes, false, false>(x, buffer, g, signs, count, f, first_step);
}

// A SIMD unit's entries (detail/cpu_kernels.h): vectors of Lanes floats up to the last whole 64
// coordinates, the rest by the scalar unit.
template <int Lanes>
void simd_momentum(float* m, const float* g, std::size_t count, float keep, float mix) {
  const std::size_t vectors = count / 64 * 64;
  momentum_vectors<Lanes>(m, g, vectors, keep, mix);
  kScalarKernels.momentum(m + vectors, g + vectors, count - vectors, keep, mix);
}

template <int Lanes>
void simd_update(float* x, float* buffer, const float* g, const std::uint64_t* signs, std::size_t count,
                 const SgdFactors& f, bool first_step) {
  const std::size_t vectors = count / 64 * 64;
  update_vectors<Lanes>(x, buffer, g, signs, vectors, f, first_step);
  kScalarKernels.update(x + vectors, buffer == nullptr ? nullptr : buffer + vectors,
                        g == nullptr ? nullptr : g + vectors, signs == nullptr ? nullptr : signs + vectors / 64,
                        count - vectors, f, first_step);
}

}  // namespace
}  // namespace ballot::kernels::detail
