// LSB-first bit streams over 64-bit words, and Elias-gamma codes (Elias 1975), for QSGD's
// optional variable-length level coding. Bit k of the stream is bit k%64 of word k/64.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

#include "coding/wire_format.h"

namespace ballot::coding::detail {

class BitWriter {
 public:
  // Appends the low `count` bits of `bits` (count <= 64), lowest first.
  void put(std::uint64_t bits, int count) {
    if (count == 0) return;
    if (count < 64) bits &= (std::uint64_t{1} << count) - 1;
    current_ |= bits << used_;
    if (used_ + count >= 64) {
      words_.push_back(current_);
      current_ = used_ == 0 ? 0 : bits >> (64 - used_);
      used_ = used_ + count - 64;
    } else {
      used_ += count;
    }
    total_ += static_cast<std::uint64_t>(count);
  }
  // Elias gamma of value >= 1: ⌊log2 value⌋ zeros, then value's bits from the most significant.
  void put_gamma(std::uint64_t value) {
    const int width = std::bit_width(value);  // >= 1
    put(0, width - 1);
    for (int b = width - 1; b >= 0; --b) put((value >> b) & 1u, 1);
  }
  std::uint64_t bit_count() const noexcept { return total_; }
  // The words, the last one padded with zeros.
  std::vector<std::uint64_t> finish() {
    if (used_ > 0) words_.push_back(current_);
    used_ = 0;
    current_ = 0;
    return std::move(words_);
  }

 private:
  std::vector<std::uint64_t> words_;
  std::uint64_t current_ = 0;
  int used_ = 0;
  std::uint64_t total_ = 0;
};

// Reads untrusted bits: every read is checked against the declared bit count.
class BitReader {
 public:
  BitReader(const std::uint8_t* words, std::uint64_t bit_count) : words_(words), limit_(bit_count) {}

  bool get(std::uint32_t& bit) {
    if (pos_ >= limit_) return false;
    const auto word = load_pod<std::uint64_t>(words_ + 8 * (pos_ / 64));
    bit = static_cast<std::uint32_t>((word >> (pos_ % 64)) & 1u);
    ++pos_;
    return true;
  }
  // An Elias-gamma value of at most `max_width` bits; false if truncated or too long.
  bool get_gamma(std::uint64_t& value, int max_width) {
    int zeros = 0;
    std::uint32_t bit = 0;
    while (true) {
      if (!get(bit)) return false;
      if (bit) break;
      if (++zeros >= max_width) return false;
    }
    value = 1;
    for (int b = 0; b < zeros; ++b) {
      if (!get(bit)) return false;
      value = (value << 1) | bit;
    }
    return true;
  }
  std::uint64_t position() const noexcept { return pos_; }

 private:
  const std::uint8_t* words_;
  std::uint64_t limit_;
  std::uint64_t pos_ = 0;
};

}  // namespace ballot::coding::detail
