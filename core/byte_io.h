// Bounded little-endian reading and writing of bytes: the one codec under every decoder of
// untrusted or on-disk bytes (frames, envelopes, messages, codec payloads, checkpoints, states).
//
// ByteReader is a cursor over bytes it does not own. Every read checks the remaining length first
// and never does arithmetic on an untrusted count that could overflow (counts are compared with
// remaining() / element size). Errors are kMalformed and name the context and the field:
//   "<context> truncated while reading <field> at byte <position>"
//   "<n> trailing bytes after the <context>"
// ByteWriter appends the same encodings to a vector it owns. Neither is thread-safe; both are
// cheap values owned by one encoder or decoder.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "core/result.h"

namespace ballot {

static_assert(std::endian::native == std::endian::little, "Ballot's byte formats are little-endian");

class ByteWriter {
 public:
  ByteWriter() = default;
  explicit ByteWriter(std::vector<std::uint8_t> start) : bytes_(std::move(start)) {}

  // An integer, enum or floating-point value in little-endian order.
  template <typename T>
  ByteWriter& put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
    return *this;
  }
  // Values laid out one after the other (no count: write one first when the reader needs it).
  template <typename T>
  ByteWriter& put_array(std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto at = bytes_.size();
    bytes_.resize(at + values.size_bytes());
    if (!values.empty()) std::memcpy(bytes_.data() + at, values.data(), values.size_bytes());
    return *this;
  }
  ByteWriter& put_bytes(std::span<const std::uint8_t> bytes) { return put_array(bytes); }

  std::size_t size() const noexcept { return bytes_.size(); }
  std::vector<std::uint8_t>& bytes() noexcept { return bytes_; }
  std::vector<std::uint8_t> take() noexcept { return std::move(bytes_); }

 private:
  std::vector<std::uint8_t> bytes_;
};

class ByteReader {
 public:
  // `context` names what is decoded in error messages ("checkpoint", "vote"); it must outlive
  // the reader (a string literal). Reading starts at `start` (clamped to the end).
  ByteReader(std::span<const std::uint8_t> bytes, const char* context, std::size_t start = 0)
      : bytes_(bytes), context_(context), pos_(start <= bytes.size() ? start : bytes.size()) {}

  std::size_t remaining() const noexcept { return bytes_.size() - pos_; }
  std::size_t position() const noexcept { return pos_; }

  template <typename T>
  Result<T> read(const char* field) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return truncated(field);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  // A view of `count` elements of `element_bytes` each (unaligned: copy them out with memcpy).
  Result<std::span<const std::uint8_t>> take(std::size_t count, std::size_t element_bytes, const char* field) {
    if (element_bytes != 0 && count > remaining() / element_bytes) return truncated(field);
    const auto view = bytes_.subspan(pos_, count * element_bytes);
    pos_ += count * element_bytes;
    return view;
  }
  Result<std::span<const std::uint8_t>> take_bytes(std::size_t count, const char* field) {
    return take(count, 1, field);
  }
  // `count` values of T copied out; `count` was checked against remaining() before allocating.
  template <typename T>
  Result<std::vector<T>> read_array(std::size_t count, const char* field) {
    static_assert(std::is_trivially_copyable_v<T>);
    BALLOT_ASSIGN_OR_RETURN(const auto view, take(count, sizeof(T), field));
    std::vector<T> values(count);
    if (count != 0) std::memcpy(values.data(), view.data(), view.size());
    return values;
  }
  // The rest of the bytes.
  std::span<const std::uint8_t> rest() noexcept {
    const auto view = bytes_.subspan(pos_);
    pos_ = bytes_.size();
    return view;
  }

  // The bytes must be consumed exactly: trailing bytes are an error too.
  Status expect_end() const {
    if (remaining() == 0) return {};
    return make_error(ErrorCode::kMalformed, std::to_string(remaining()) + " trailing bytes after the " + context_);
  }
  // A kMalformed error about this input: "<context>: <why>".
  Error malformed(const std::string& why) const {
    return make_error(ErrorCode::kMalformed, std::string(context_) + ": " + why);
  }

 private:
  Error truncated(const char* field) const {
    return make_error(ErrorCode::kMalformed,
                      std::string(context_) + " truncated while reading " + field + " at byte " + std::to_string(pos_));
  }
  std::span<const std::uint8_t> bytes_;
  const char* context_;
  std::size_t pos_;
};

}  // namespace ballot
