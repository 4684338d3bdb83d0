#include "core/rng.h"

#include <cmath>
#include <numbers>

#include "core/philox.h"

namespace ballot {
namespace {
__extension__ using Uint128 = unsigned __int128;  // GCC/Clang extension, for Lemire's method

std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

std::uint64_t Rng::stream_id(std::initializer_list<std::uint64_t> parts) noexcept {
  std::uint64_t id = 0x42414C4C4F54ull;  // "BALLOT"
  for (auto part : parts) id = splitmix64(id ^ splitmix64(part));
  return id;
}

Rng Rng::substream(std::uint64_t id) const noexcept { return Rng(seed_, stream_id({stream_, id})); }

std::uint32_t Rng::next_u32() noexcept {
  const std::uint64_t block = position_ >> 2;  // philox_stream_word's block, computed once for its 4 words
  if (block != cached_block_) {
    const PhiloxBlock out = philox_stream_block(seed_, stream_, block);
    for (int i = 0; i < 4; ++i) cached_[i] = out.v[i];
    cached_block_ = block;
  }
  return cached_[position_++ & 3];
}

std::uint64_t Rng::next_u64() noexcept {
  const std::uint64_t low = next_u32();
  return low | (static_cast<std::uint64_t>(next_u32()) << 32);
}

float Rng::uniform_float() noexcept { return philox_unit_float(next_u32()); }

double Rng::uniform_double() noexcept { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

std::uint64_t Rng::uniform_int(std::uint64_t bound) noexcept {
  // Lemire, "Fast random integer generation in an interval" (2019), 64-bit version.
  Uint128 product = static_cast<Uint128>(next_u64()) * bound;
  auto low = static_cast<std::uint64_t>(product);
  if (low < bound) {
    const std::uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      product = static_cast<Uint128>(next_u64()) * bound;
      low = static_cast<std::uint64_t>(product);
    }
  }
  return static_cast<std::uint64_t>(product >> 64);
}

double Rng::normal() noexcept {
  // 1 - u is in (0, 1], so the logarithm is finite.
  const double u1 = 1.0 - uniform_double();
  const double u2 = uniform_double();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace ballot
