// AlignedAllocator<T, A>: std::allocator replacement giving A-byte aligned storage, so that SIMD
// kernels may use aligned loads and a buffer never straddles cache lines at its start.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace ballot {

inline constexpr std::size_t kCacheLineBytes = 64;

template <typename T, std::size_t Alignment = kCacheLineBytes>
struct AlignedAllocator {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = AlignedAllocator<U, Alignment>;
  };

  AlignedAllocator() noexcept = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U, Alignment>&) noexcept {}  // NOLINT: implicit

  T* allocate(std::size_t count) {
    return static_cast<T*>(::operator new (count * sizeof(T), std::align_val_t{Alignment}));
  }
  void deallocate(T* pointer, std::size_t) noexcept { ::operator delete (pointer, std::align_val_t{Alignment}); }
  template <typename U>
  bool operator==(const AlignedAllocator<U, Alignment>&) const noexcept {
    return true;
  }
};

// A cache-line aligned std::vector.
template <typename T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace ballot
