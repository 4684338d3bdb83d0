#include "core/spec.h"

#include <gtest/gtest.h>

namespace ballot {
namespace {

TEST(Spec, NameAndOptions) {
  auto spec = Spec::parse(" trimmed_mean : f = 2, threads=4 ");
  ASSERT_TRUE(spec.ok()) << spec.error().to_string();
  EXPECT_EQ(spec->name(), "trimmed_mean");
  EXPECT_EQ(*spec->get_int("f", 0), 2);
  EXPECT_EQ(*spec->get_int("threads", 1), 4);
  EXPECT_EQ(*spec->get_int("missing", 7), 7);
  EXPECT_EQ(spec->to_string(), "trimmed_mean:f=2,threads=4");
  EXPECT_TRUE(spec->check_known({"f", "threads"}).ok());
}

TEST(Spec, BareName) {
  auto spec = Spec::parse("median");
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(spec->options().empty());
  EXPECT_EQ(spec->to_string(), "median");
}

TEST(Spec, TypedValues) {
  auto spec = Spec::parse("topk:ratio=0.01,ef=1,mode=layer");
  ASSERT_TRUE(spec.ok());
  EXPECT_DOUBLE_EQ(*spec->get_double("ratio", 0), 0.01);
  EXPECT_TRUE(*spec->get_bool("ef", false));
  EXPECT_EQ(spec->get_string("mode", "model"), "layer");
  EXPECT_FALSE(spec->get_int("ratio", 0).ok());
  EXPECT_FALSE(spec->get_bool("mode", false).ok());
}

TEST(Spec, ErrorsNameTheProblem) {
  for (const char* bad : {"", ":f=1", "krum:f", "krum:=3", "krum:f=1,f=2", "krum:f=1,,"}) {
    auto spec = Spec::parse(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(spec.error().message.find("bad spec"), std::string::npos);
  }
  auto typo = Spec::parse("krum:ff=2");
  ASSERT_TRUE(typo.ok());
  auto known = typo->check_known({"f", "m"});
  ASSERT_FALSE(known.ok());
  EXPECT_NE(known.error().message.find("'ff'"), std::string::npos);
}

TEST(Spec, Pipeline) {
  auto stages = Spec::parse_pipeline("nnm:f=2 > bucketing:s=2 > krum:f=2");
  ASSERT_TRUE(stages.ok());
  ASSERT_EQ(stages->size(), 3u);
  EXPECT_EQ((*stages)[0].name(), "nnm");
  EXPECT_EQ((*stages)[2].to_string(), "krum:f=2");
  EXPECT_FALSE(Spec::parse_pipeline("nnm > ").ok());
}

}  // namespace
}  // namespace ballot
