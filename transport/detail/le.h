// Internal: fixed-width little-endian stores and loads (wire format is little-endian everywhere).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ballot::transport::detail {

template <typename T>
inline void store_le(std::uint8_t* out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(value) >> (8 * i));
}

template <typename T>
inline T load_le(const std::uint8_t* in) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return static_cast<T>(value);
}

}  // namespace ballot::transport::detail
