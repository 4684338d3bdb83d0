// Internal: the allocator behind Matrix::values, the outputs of the pre-aggregators. Not part of
// the public API.
//
// A pre-aggregator writes every value of its output, and at d = 1e6 the output is tens to hundreds
// of MB, so two things std::allocator does cost more than the pre-aggregation itself:
//   - value-initialisation: resize() zero-fills the whole output on the calling thread before the
//     (multi-threaded) pass that overwrites it;
//   - a fresh mapping per call: blocks this large come from mmap and go back on free, so every call
//     takes a page fault (and the kernel zeroes a page) per 4 KiB of output.
// So construct() without arguments default-initialises (leaves floats as they are), and blocks of
// at least kRecycledBytes are kept for reuse by the next allocation of the same size: a training
// loop aggregates the same shapes every round.
#pragma once

#include <cstddef>
#include <new>
#include <utility>

namespace ballot::robust::detail {

// Blocks smaller than this go straight to operator new / delete.
inline constexpr std::size_t kRecycledBytes = std::size_t{1} << 20;

// 64-byte aligned storage of `bytes` bytes: a kept block of exactly that size if there is one.
void* allocate_output(std::size_t bytes);
// Keeps the block for reuse (at most a few blocks and 1 GiB, the oldest given back first) or frees it.
void release_output(void* block, std::size_t bytes) noexcept;

template <typename T>
struct OutputAllocator {
  using value_type = T;

  OutputAllocator() noexcept = default;
  template <typename U>
  OutputAllocator(const OutputAllocator<U>&) noexcept {}  // NOLINT: implicit, as allocators are

  T* allocate(std::size_t count) { return static_cast<T*>(allocate_output(count * sizeof(T))); }
  void deallocate(T* block, std::size_t count) noexcept { release_output(block, count * sizeof(T)); }

  template <typename U>
  void construct(U* p) noexcept(noexcept(::new (static_cast<void*>(p)) U)) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  template <typename U>
  bool operator==(const OutputAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace ballot::robust::detail
