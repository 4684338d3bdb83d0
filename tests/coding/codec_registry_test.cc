#include "coding/codec_registry.h"

#include <gtest/gtest.h>

#include "coding/error_feedback.h"

namespace ballot::coding {
namespace {

TEST(CodecRegistry, EveryNameBuildsWithDefaults) {
  for (const auto& name : codec_names()) {
    const std::string text = name == "threshold" ? "threshold:tau=0.1" : name;
    const auto codec = make_codec(text);
    ASSERT_TRUE(codec.ok()) << text << ": " << codec.error().to_string();
    EXPECT_STREQ(codec_id_name((*codec)->id()), name.c_str());
  }
}

TEST(CodecRegistry, OptionsReachTheCodec) {
  auto qsgd = make_codec("qsgd:s=16");
  ASSERT_TRUE(qsgd.ok());
  EXPECT_EQ((*qsgd)->spec(), "qsgd:elias=0,granularity=model,s=16");
  auto topk = make_codec("topk:ratio=0.01,ef=1");
  ASSERT_TRUE(topk.ok());
  EXPECT_TRUE((*topk)->stateful());
  EXPECT_NE(dynamic_cast<ErrorFeedback*>(topk->get()), nullptr);
  EXPECT_EQ((*topk)->wire_size(1000), 24u + 4u + 8u * 10u);
  auto layered = make_codec("topk:k=5, granularity=layer");
  ASSERT_TRUE(layered.ok());
  EXPECT_EQ((*layered)->granularity(), Granularity::kLayer);
  // 1-bit SGD comes with its error feedback unless told otherwise.
  EXPECT_TRUE((*make_codec("onebit"))->stateful());
  EXPECT_FALSE((*make_codec("onebit:ef=0"))->stateful());
  EXPECT_EQ((*make_codec("terngrad"))->granularity(), Granularity::kLayer);
}

TEST(CodecRegistry, BadSpecsAreErrorsNamingTheProblem) {
  struct Case { const char* spec; const char* mentions; };
  for (const Case c : {Case{"nope", "unknown codec"}, Case{"qsgd:levels=3", "levels"},
                       Case{"qsgd:s=0", "s must"}, Case{"qsgd:s=70000", "s must"},
                       Case{"topk:k=3,ratio=0.1", "not both"}, Case{"topk:ratio=2", "ratio"},
                       Case{"topk:k=-1", "k must"}, Case{"topk:granularity=row", "granularity"},
                       Case{"threshold", "tau"}, Case{"signum:beta=1", "beta"},
                       Case{"gtopk:ef=1", "residual"}, Case{"sign:ef=maybe", "ef"},
                       Case{"terngrad:clip=-1", "clip"}, Case{"", "empty"}}) {
    const auto codec = make_codec(c.spec);
    ASSERT_FALSE(codec.ok()) << c.spec;
    EXPECT_EQ(codec.error().code, ErrorCode::kInvalidArgument) << c.spec;
    EXPECT_NE(codec.error().message.find(c.mentions), std::string::npos)
        << c.spec << ": " << codec.error().message;
  }
}

}  // namespace
}  // namespace ballot::coding
