#include "core/json_nesting.h"

#include <gtest/gtest.h>

#include <string>

namespace ballot {
namespace {

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonNesting, CountsArraysAndObjects) {
  EXPECT_EQ(json_nesting("1"), 0u);
  EXPECT_EQ(json_nesting("{}"), 1u);
  EXPECT_EQ(json_nesting(R"({"a": [1, {"b": [[]]}], "c": {}})"), 5u);
  EXPECT_EQ(json_nesting("[[]] [[[ ]]]"), 3u);
}

TEST(JsonNesting, BracketsInsideStringsDoNotCount) {
  EXPECT_EQ(json_nesting(R"({"a": "[[[{{{"})"), 1u);
  EXPECT_EQ(json_nesting(R"(["\"[[[", "\\", ["x"]])"), 2u);  // an escaped quote, then an escaped backslash
}

TEST(JsonNesting, StopsPastTheLimit) {
  EXPECT_TRUE(json_nesting_ok(nested(kMaxJsonNesting)));
  EXPECT_FALSE(json_nesting_ok(nested(kMaxJsonNesting + 1)));
  EXPECT_EQ(json_nesting(nested(1'000'000), 10), 11u);
  EXPECT_EQ(json_nesting("]]]}}}[", 10), 1u);  // unbalanced closers do not go below zero
}

}  // namespace
}  // namespace ballot
