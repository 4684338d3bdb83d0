#include "coding/codec_registry.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <string>

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

TEST(CodecRegistry, EveryTableLineIsWellFormed) {
  std::set<std::string> names;
  std::set<CodecId> ids;
  for (const CodecEntry& entry : codec_table()) {
    EXPECT_TRUE(names.insert(std::string(entry.name)).second) << entry.name;
    EXPECT_TRUE(ids.insert(entry.properties.id).second) << entry.name;
    EXPECT_FALSE(entry.summary.empty()) << entry.name;
    EXPECT_EQ(find_codec(entry.properties.id), &entry);
    const auto codec = make_codec(entry.example);
    ASSERT_TRUE(codec.ok()) << entry.example << ": " << codec.error().to_string();
    EXPECT_EQ((*codec)->id(), entry.properties.id) << entry.name;
    EXPECT_TRUE(!entry.properties.error_feedback || (*codec)->stateful()) << entry.name;
    const std::string example(entry.example);
    const std::string with_ef = example + (example.find(':') == std::string::npos ? ":" : ",") + "ef=1";
    EXPECT_EQ(make_codec(with_ef).ok(), !entry.properties.own_residual && !entry.properties.unbiased) << with_ef;
  }
}

// docs/codecs.md cannot fall behind the table: each name has a row of its table and its wire id.
TEST(CodecRegistry, DocsListEveryEntry) {
  std::ifstream file(std::string(BALLOT_SOURCE_DIR) + "/docs/codecs.md");
  ASSERT_TRUE(file.good());
  const std::string docs((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  for (const CodecEntry& entry : codec_table()) {
    const std::string row = "| `" + std::string(entry.name);
    EXPECT_TRUE(docs.find(row + "`") != std::string::npos || docs.find(row + ":") != std::string::npos ||
                docs.find(row + "[") != std::string::npos)
        << entry.name << " has no row in docs/codecs.md";
    EXPECT_NE(docs.find(std::string(entry.name) + " " + std::to_string(static_cast<int>(entry.properties.id))),
              std::string::npos)
        << entry.name << ": wire id missing from docs/codecs.md";
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

// spec() re-parses to the same codec: numbers in their shortest exact form (six decimals turned
// ratio=1e-7 into an invalid 0.000000 and changed a budget at d = 10^7), onebit's ef=0 kept.
TEST(CodecRegistry, SpecsRoundTrip) {
  const auto layout = GradientLayout::whole(10000000);
  for (const char* spec :
       {"topk:ratio=0.0000001", "topk:ratio=0.0001234", "randomk:ratio=0.07,granularity=layer", "gtopk:ratio=0.0001234",
        "threshold:tau=1e-7", "threshold:tau=0.8", "terngrad:clip=1e-7", "terngrad:clip=0.1234567",
        "dgc:ratio=0.0001234,momentum=0.95,clip=0.1234567,sample=0.003", "signum:beta=0.123456789", "onebit:ef=0",
        "onebit", "onebit:granularity=model", "scaled_sign:ef=1", "qsgd:s=7,elias=1", "sgd_is_not_a_codec"}) {
    const auto first = make_codec(spec);
    if (std::string(spec) == "sgd_is_not_a_codec") {
      EXPECT_FALSE(first.ok());
      continue;
    }
    ASSERT_TRUE(first.ok()) << spec << ": " << first.error().to_string();
    const std::string text = (*first)->spec();
    const auto again = make_codec(text);
    ASSERT_TRUE(again.ok()) << spec << " -> " << text << ": " << again.error().to_string();
    EXPECT_EQ((*again)->spec(), text) << spec;
    EXPECT_EQ((*again)->stateful(), (*first)->stateful()) << spec << " -> " << text;
    EXPECT_EQ((*again)->wire_size(layout), (*first)->wire_size(layout)) << spec << " -> " << text;
  }
  EXPECT_EQ(make_codec("threshold:tau=0.8").value()->spec(), "threshold:tau=0.8");
  EXPECT_EQ(make_codec("onebit:ef=0").value()->spec(), "onebit:ef=0,granularity=layer");
  EXPECT_EQ(make_codec("onebit").value()->spec(), "onebit:ef=1,granularity=layer");
}

TEST(CodecRegistry, BadSpecsAreErrorsNamingTheProblem) {
  struct Case {
    const char* spec;
    const char* mentions;
  };
  for (const Case c :
       {Case{"nope", "unknown codec"}, Case{"qsgd:levels=3", "levels"}, Case{"qsgd:s=0", "s must"},
        Case{"qsgd:s=70000", "s must"}, Case{"topk:k=3,ratio=0.1", "not both"}, Case{"topk:ratio=2", "ratio"},
        Case{"topk:k=-1", "k must"}, Case{"topk:granularity=row", "granularity"}, Case{"threshold", "tau"},
        Case{"signum:beta=1", "beta"}, Case{"gtopk:ef=1", "residual"}, Case{"sign:ef=maybe", "ef"},
        Case{"terngrad:clip=-1", "clip"}, Case{"", "empty"}, Case{"terngrad:clip=1e300", "finite as a float"},
        Case{"dgc:clip=1e39", "finite as a float"}, Case{"threshold:tau=1e40", "finite as a float"},
        Case{"randomk:ratio=0.1,ef=1", "not contractive"}, Case{"qsgd:ef=1", "not contractive"}}) {
    const auto codec = make_codec(c.spec);
    ASSERT_FALSE(codec.ok()) << c.spec;
    EXPECT_EQ(codec.error().code, ErrorCode::kInvalidArgument) << c.spec;
    EXPECT_NE(codec.error().message.find(c.mentions), std::string::npos) << c.spec << ": " << codec.error().message;
  }
}

}  // namespace
}  // namespace ballot::coding
