// A CLI11 check for unsigned options: the text as typed must be a whole number in range.
// Without it CLI11 converts "-1" for an unsigned option into 2^64 − 1 (`--rounds -1` became
// 18446744073709551615 rounds), and an error would show that wrapped number instead of "-1".
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>

namespace ballot::apps {

inline CLI::Validator whole_number(std::uint64_t max, std::uint64_t min = 0) {
  return CLI::Validator(
      [max, min](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto parsed = std::from_chars(text.data(), end, value);
        const bool digits = !text.empty() && text[0] >= '0' && text[0] <= '9';
        if (!digits || parsed.ec != std::errc() || parsed.ptr != end || value < min || value > max) {
          return "must be a whole number in [" + std::to_string(min) + ", " + std::to_string(max) + "], not '" + text +
                 "'";
        }
        return {};
      },
      "UINT");
}

// The check for an option bound to `T` (an unsigned integer, or an optional / vector of one).
template <typename T>
CLI::Validator whole_number_for(std::uint64_t min = 0) {
  return whole_number(std::numeric_limits<T>::max(), min);
}

}  // namespace ballot::apps
