// Rng: a seeded, counter-based random stream (Philox4x32-10, core/philox.h).
//
// Rng(seed, stream) yields the same sequence in every process, on every platform and on the GPU
// (philox_stream_word gives random access to it). Give each purpose its own stream, derived from
// structured coordinates, e.g. Rng(seed, Rng::stream_id({round, node, kPurposeQuantize})), instead
// of sharing one generator: results then do not depend on call order across threads or nodes.
//
// Everything here is defined bit-exactly by this code (no std:: distributions, whose output
// differs between standard libraries). Not thread-safe; use one Rng per thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>

namespace ballot {

class Rng {
 public:
  using result_type = std::uint64_t;

  explicit Rng(std::uint64_t seed, std::uint64_t stream = 0) noexcept : seed_(seed), stream_(stream) {}

  // Mixes structured coordinates into one stream id (SplitMix64 finaliser over each part).
  static std::uint64_t stream_id(std::initializer_list<std::uint64_t> parts) noexcept;
  // An independent stream of the same seed, keyed by `id` and this stream.
  Rng substream(std::uint64_t id) const noexcept;

  std::uint64_t seed() const noexcept { return seed_; }
  std::uint64_t stream() const noexcept { return stream_; }
  // Number of 32-bit words consumed so far; seek() jumps anywhere in O(1).
  std::uint64_t position() const noexcept { return position_; }
  void seek(std::uint64_t position) noexcept { position_ = position; }

  std::uint32_t next_u32() noexcept;
  std::uint64_t next_u64() noexcept;
  // Uniform in [0, 1) with 24 (float) or 53 (double) random bits.
  float uniform_float() noexcept;
  double uniform_double() noexcept;
  // Uniform integer in [0, bound), without modulo bias (Lemire's method); bound > 0.
  std::uint64_t uniform_int(std::uint64_t bound) noexcept;
  // Standard normal by the Box-Muller transform (one value per call). Uses libm log/cos, so it is
  // reproducible for one build and C library, not guaranteed across different libm versions.
  double normal() noexcept;
  bool bernoulli(double p) noexcept { return uniform_double() < p; }

  // Fisher-Yates shuffle with uniform_int: the same permutation everywhere for the same stream.
  template <typename T>
  void shuffle(std::span<T> items) noexcept {
    for (std::size_t i = items.size(); i > 1; --i) {
      const std::size_t j = static_cast<std::size_t>(uniform_int(i));
      std::swap(items[i - 1], items[j]);
    }
  }

  // UniformRandomBitGenerator, for algorithms that need one; prefer the members above.
  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return std::numeric_limits<result_type>::max(); }
  result_type operator()() noexcept { return next_u64(); }

 private:
  std::uint64_t seed_;
  std::uint64_t stream_;
  std::uint64_t position_ = 0;
  // The last Philox block computed (4 words): sequential draws compute each block once.
  std::uint64_t cached_block_ = ~std::uint64_t{0};
  std::uint32_t cached_[4] = {};
};

}  // namespace ballot
