// BitVector: packed signs, one bit per coordinate.
//
// Bit k of 64-bit word w is coordinate 64w + k. Bit 1 means non-negative (+1), bit 0 negative
// (-1); sign(0) = +1. Bits past size() in the last word ("padding") are always zero, so that
// word-wise equality, hashing and popcounts need no masking. Storage is 64-byte aligned.
// Not thread-safe for concurrent mutation; concurrent reads are fine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/aligned_allocator.h"
#include "core/result.h"

namespace ballot {

class BitVector {
 public:
  BitVector() = default;
  // `size` coordinates, all bits zero (all -1) unless `value` is true.
  explicit BitVector(std::size_t size, bool value = false);

  // Validates bytes that may come from a peer: `words` must hold exactly words_for(size) words
  // with zero padding bits; anything else is ErrorCode::kMalformed.
  static Result<BitVector> from_words(std::size_t size, std::span<const std::uint64_t> words);
  // The same from the words' little-endian bytes as a decoder holds them (8·words_for(size) bytes,
  // any alignment), copied once.
  static Result<BitVector> from_bytes(std::size_t size, std::span<const std::uint8_t> bytes);

  // Without overflow for every size_t (bits + 63 would wrap near the top).
  static constexpr std::size_t words_for(std::size_t bits) noexcept { return bits / 64 + (bits % 64 != 0 ? 1 : 0); }

  std::size_t size() const noexcept { return size_; }
  std::size_t num_words() const noexcept { return words_.size(); }
  bool empty() const noexcept { return size_ == 0; }

  std::uint64_t* data() noexcept { return words_.data(); }
  const std::uint64_t* data() const noexcept { return words_.data(); }
  std::span<std::uint64_t> words() noexcept { return words_; }
  std::span<const std::uint64_t> words() const noexcept { return words_; }

  // Bounds are the caller's responsibility (BALLOT_ENFORCE in debug-style checks).
  bool get(std::size_t i) const;
  void set(std::size_t i, bool value);
  int sign(std::size_t i) const { return get(i) ? 1 : -1; }

  // Resizes to `size` coordinates; new coordinates are `value`; padding stays zero.
  void resize(std::size_t size, bool value = false);
  void fill(bool value);
  // Every bit flipped (sign negated), padding kept zero.
  void flip();

  // Mask of the valid bits of the last word (all ones when size() is a multiple of 64).
  std::uint64_t last_word_mask() const noexcept;
  // Clears the padding bits after raw writes through data()/words().
  void clear_padding() noexcept;
  bool padding_is_clear() const noexcept;

  std::size_t count_ones() const noexcept;

  friend bool operator==(const BitVector& a, const BitVector& b) noexcept;

 private:
  std::size_t size_ = 0;
  AlignedVector<std::uint64_t> words_;
};

}  // namespace ballot
