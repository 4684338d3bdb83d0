// The entries of a float vector: the indices whose bits are not +0 (so −0, NaN and every nonzero
// value are entries). What a sparse encoding of a mostly-zero vector lists.
//
// One read of x at the vector unit's speed: blocks of 16 floats are tested at once, and only the
// blocks that hold an entry are looked at one by one (compiled for AVX-512, AVX2 and plain x86-64,
// chosen at load time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ballot {

// Appends the indices of x's entries, rising, to `out`. x.size() ≤ 2^32 (the indices are u32).
void append_entries(std::span<const float> x, std::vector<std::uint32_t>& out);

// How many entries x has.
std::size_t count_entries(std::span<const float> x);

}  // namespace ballot
