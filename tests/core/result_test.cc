#include "core/result.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/enforce.h"

namespace ballot {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return make_error(ErrorCode::kInvalidArgument, "not positive: " + std::to_string(x));
  return x;
}

Result<int> doubled(int x) {
  BALLOT_ASSIGN_OR_RETURN(int value, parse_positive(x));
  return 2 * value;
}

Status check_both(int a, int b) {
  BALLOT_TRY(parse_positive(a));
  BALLOT_TRY(parse_positive(b));
  return {};
}

TEST(Result, HoldsValueOrError) {
  auto good = parse_positive(3);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  EXPECT_EQ(good.value_or(7), 3);

  auto bad = parse_positive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.value_or(7), 7);
}

TEST(Result, MacrosPropagateErrors) {
  EXPECT_EQ(*doubled(4), 8);
  EXPECT_EQ(doubled(0).error().message, "not positive: 0");
  EXPECT_TRUE(check_both(1, 2).ok());
  EXPECT_EQ(check_both(1, -2).error().message, "not positive: -2");
}

TEST(Result, WrongAccessIsACallerBugNotUndefinedBehaviour) {
  auto bad = parse_positive(-1);
  EXPECT_THROW((void)bad.value(), EnforceError);
  auto good = parse_positive(1);
  EXPECT_THROW((void)good.error(), EnforceError);
  Status fine;
  EXPECT_THROW((void)fine.error(), EnforceError);
}

TEST(Result, MoveOnlyValues) {
  Result<std::unique_ptr<int>> result(std::make_unique<int>(5));
  auto owned = std::move(result).value();
  EXPECT_EQ(*owned, 5);
}

TEST(Error, ToStringNamesCodeMessageAndPeer) {
  auto error = make_error(ErrorCode::kMalformed, "frame too short", 3u);
  EXPECT_EQ(error.to_string(), "malformed: frame too short (peer 3)");
  EXPECT_STREQ(error_code_name(ErrorCode::kTimeout), "timeout");
}

}  // namespace
}  // namespace ballot
