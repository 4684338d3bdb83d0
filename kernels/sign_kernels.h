// Sign packing and unpacking, and agreement between sign vectors (CPU, runtime-dispatched).
//
// Packing rule (kernels/sign_logic.h): bit 1 (+1) unless the value is strictly negative, so
// +0.0, -0.0 and NaN all pack to +1. All functions are memory-bound O(d), deterministic and
// bit-identical on every ISA level. Thread-safe for distinct outputs.
#pragma once

#include <cstddef>
#include <span>

#include "core/bit_vector.h"
#include "core/gradient_layout.h"

namespace ballot::kernels {

// out becomes values.size() bits, bit i = sign_bit(values[i]).
void pack_signs(std::span<const float> values, BitVector& out);
BitVector pack_signs(std::span<const float> values);
// Bits [offset, offset + values.size()) of `out` from `values`, the others unchanged: for a vector
// packed in pieces. offset a multiple of 64, the piece ending at a multiple of 64 or at out.size()
// (BALLOT_ENFORCE), so that the pieces share no word.
void pack_signs_at(std::span<const float> values, std::size_t offset, BitVector& out);

// out[i] = bit i ? +scale : -scale. out.size() must equal signs.size().
void unpack_signs(const BitVector& signs, std::span<float> out, float scale = 1.0f);

// Per-layer scales: out[i] = ±layer_scales[l] for i in layer l (e.g. EF-signSGD's ‖v‖₁/d per
// layer). layout.total_size() == signs.size() == out.size(), one scale per layer.
void unpack_signs(const BitVector& signs, const GradientLayout& layout, std::span<const float> layer_scales,
                  std::span<float> out);

// Number of coordinates where a and b hold the same sign (sizes must match).
std::size_t agreement_count(const BitVector& a, const BitVector& b);

}  // namespace ballot::kernels
