// Implementation plumbing of transport::PayloadBytes (transport/transport.h): an allocator that
// lets the receive path size a payload buffer without zero-filling it first.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace ballot::transport::detail {

// std::allocator, except that value-initialising construction (what vector::resize does) leaves
// bytes uninitialised: the receive path reads each payload straight into its buffer, and
// zero-filling it first would be one more pass over every received byte.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() noexcept = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// PayloadBytes == std::vector<std::uint8_t> (found by argument-dependent lookup through the
// allocator, whose namespace this is).
inline bool operator==(const std::vector<std::uint8_t, DefaultInitAllocator<std::uint8_t>>& a,
                       const std::vector<std::uint8_t>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

}  // namespace ballot::transport::detail
