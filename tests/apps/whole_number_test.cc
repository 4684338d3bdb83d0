#include "apps/whole_number.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace ballot::apps {
namespace {

// The validator's message for `text` (empty: accepted). CLI11 validators may rewrite the text;
// this one never does.
std::string check(const CLI::Validator& validator, std::string text) {
  const std::string before = text;
  std::string message = validator(text);
  EXPECT_EQ(text, before);
  return message;
}

TEST(WholeNumber, AcceptsDigitsInRange) {
  const auto rounds = whole_number(1000, 1);
  EXPECT_EQ(check(rounds, "1"), "");
  EXPECT_EQ(check(rounds, "1000"), "");
  EXPECT_EQ(check(rounds, "0042"), "");
  EXPECT_EQ(check(whole_number_for<std::uint64_t>(), "18446744073709551615"), "");
  EXPECT_EQ(check(whole_number_for<std::uint8_t>(), "255"), "");
}

TEST(WholeNumber, RefusesWhatCli11WouldWrapOrTruncate) {
  const auto rounds = whole_number(1000, 1);
  // The typed text is in the message, never a converted number.
  EXPECT_EQ(check(rounds, "-1"), "must be a whole number in [1, 1000], not '-1'");
  EXPECT_NE(check(rounds, "0"), "");
  EXPECT_NE(check(rounds, "1001"), "");
  EXPECT_NE(check(rounds, ""), "");
  EXPECT_NE(check(rounds, "+5"), "");
  EXPECT_NE(check(rounds, " 5"), "");
  EXPECT_NE(check(rounds, "5 "), "");
  EXPECT_NE(check(rounds, "5x"), "");
  EXPECT_NE(check(rounds, "1e3"), "");
  EXPECT_NE(check(rounds, "2.5"), "");
  EXPECT_NE(check(whole_number_for<std::uint64_t>(), "18446744073709551616"), "");  // 2^64
  EXPECT_NE(check(whole_number_for<std::uint8_t>(), "256"), "");
}

}  // namespace
}  // namespace ballot::apps
