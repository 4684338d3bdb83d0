#include "core/enforce.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace ballot {
namespace {

TEST(Enforce, PassingChecksDoNothing) {
  EXPECT_NO_THROW(BALLOT_ENFORCE(1 + 1 == 2));
  EXPECT_NO_THROW(BALLOT_ENFORCE_EQ(3, 3));
  EXPECT_NO_THROW(BALLOT_ENFORCE_LT(2, 3));
}

TEST(Enforce, FailureNamesExpressionAndBothOperands) {
  const int expected = 4;
  const int actual = 5;
  try {
    BALLOT_ENFORCE_EQ(actual, expected);
    FAIL() << "no exception";
  } catch (const EnforceError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("actual == expected"), std::string::npos) << message;
    EXPECT_NE(message.find("left = 5, right = 4"), std::string::npos) << message;
    EXPECT_NE(message.find("enforce_test.cc"), std::string::npos) << message;
  }
}

TEST(Enforce, ByteOperandsPrintAsNumbers) {
  const std::uint8_t label = 12;
  try {
    BALLOT_ENFORCE_LT(label, std::uint8_t{10});
    FAIL() << "no exception";
  } catch (const EnforceError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("left = 12, right = 10"), std::string::npos) << message;
  }
}

TEST(Enforce, PlainEnforceCarriesItsDetail) {
  try {
    BALLOT_ENFORCE(false, "the detail");
    FAIL() << "no exception";
  } catch (const EnforceError& error) {
    EXPECT_NE(std::string(error.what()).find("the detail"), std::string::npos);
  }
}

TEST(Enforce, OperandsAreEvaluatedOnce) {
  int calls = 0;
  auto next = [&] { return ++calls; };
  BALLOT_ENFORCE_GE(next(), 1);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace ballot
