#include "core/bit_vector.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "core/enforce.h"

namespace ballot {

BitVector::BitVector(std::size_t size, bool value) { resize(size, value); }

namespace {

Error wrong_word_count(std::size_t size, std::size_t words) {
  return make_error(ErrorCode::kMalformed, "sign vector of " + std::to_string(size) + " coordinates needs " +
                                               std::to_string(BitVector::words_for(size)) + " words, got " +
                                               std::to_string(words));
}

}  // namespace

Result<BitVector> BitVector::from_words(std::size_t size, std::span<const std::uint64_t> words) {
  if (words.size() != words_for(size)) return wrong_word_count(size, words.size());
  BitVector out;
  out.size_ = size;
  out.words_.assign(words.begin(), words.end());
  if (!out.padding_is_clear()) {
    return make_error(ErrorCode::kMalformed, "sign vector has padding bits set");
  }
  return out;
}

Result<BitVector> BitVector::from_bytes(std::size_t size, std::span<const std::uint8_t> bytes) {
  static_assert(std::endian::native == std::endian::little, "the wire's words are little-endian");
  if (bytes.size() % sizeof(std::uint64_t) != 0 || bytes.size() / sizeof(std::uint64_t) != words_for(size)) {
    return wrong_word_count(size, bytes.size() / sizeof(std::uint64_t));
  }
  BitVector out;
  out.size_ = size;
  out.words_.resize(words_for(size));
  if (!bytes.empty()) std::memcpy(out.words_.data(), bytes.data(), bytes.size());
  if (!out.padding_is_clear()) {
    return make_error(ErrorCode::kMalformed, "sign vector has padding bits set");
  }
  return out;
}

bool BitVector::get(std::size_t i) const {
  BALLOT_ENFORCE_LT(i, size_);
  return (words_[i / 64] >> (i % 64)) & 1u;
}

void BitVector::set(std::size_t i, bool value) {
  BALLOT_ENFORCE_LT(i, size_);
  const std::uint64_t bit = std::uint64_t{1} << (i % 64);
  if (value) {
    words_[i / 64] |= bit;
  } else {
    words_[i / 64] &= ~bit;
  }
}

void BitVector::resize(std::size_t size, bool value) {
  const std::size_t old_size = size_;
  words_.resize(words_for(size), value ? ~std::uint64_t{0} : 0);
  size_ = size;
  if (value && size > old_size && old_size % 64 != 0) {
    // The old last word gains ones above its old valid bits (its padding was zero).
    words_[old_size / 64] |= ~std::uint64_t{0} << (old_size % 64);
  }
  clear_padding();
}

void BitVector::fill(bool value) {
  std::fill(words_.begin(), words_.end(), value ? ~std::uint64_t{0} : 0);
  clear_padding();
}

void BitVector::flip() {
  for (auto& word : words_) word = ~word;
  clear_padding();
}

std::uint64_t BitVector::last_word_mask() const noexcept {
  const std::size_t tail = size_ % 64;
  return tail == 0 ? ~std::uint64_t{0} : (std::uint64_t{1} << tail) - 1;
}

void BitVector::clear_padding() noexcept {
  if (!words_.empty()) words_.back() &= last_word_mask();
}

bool BitVector::padding_is_clear() const noexcept { return words_.empty() || (words_.back() & ~last_word_mask()) == 0; }

std::size_t BitVector::count_ones() const noexcept {
  std::size_t total = 0;
  for (auto word : words_) total += static_cast<std::size_t>(std::popcount(word));
  return total;
}

bool operator==(const BitVector& a, const BitVector& b) noexcept {
  return a.size_ == b.size_ && std::equal(a.words_.begin(), a.words_.end(), b.words_.begin());
}

}  // namespace ballot
