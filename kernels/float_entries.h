// The entries of a float vector: the indices whose bits are not +0 (so −0, NaN and every nonzero
// value are entries). What a sparse encoding of a mostly-zero vector lists.
//
// One read of x, through the kernels' per-level table (kernels/detail/cpu_kernels.h). AVX-512:
// 16 floats tested a step and the entries' indices packed in order in a register, whatever the
// density; the other levels test blocks of 16 at once and look one by one only inside blocks that
// hold an entry. Every level gives the same output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ballot::kernels {

// Appends the indices of x's entries, rising, to `out`. x.size() ≤ 2^32 (the indices are u32).
void append_entries(std::span<const float> x, std::vector<std::uint32_t>& out);

// How many entries x has.
std::size_t count_entries(std::span<const float> x);

}  // namespace ballot::kernels
