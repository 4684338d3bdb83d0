// The codecs' dispatched loops (coding/detail: the per-coordinate reductions, stochastic
// rounding, the sparse filter) at every ISA level this CPU runs, through the public codecs: each
// level must encode the same bytes and decode the same floats as the scalar level (kernels/isa.h,
// the one ISA switch).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "coding/codec.h"
#include "coding/codec_registry.h"
#include "kernels/isa.h"
#include "tests/coding/codec_test_util.h"

namespace ballot::coding {
namespace {

struct Encodings {
  std::vector<std::vector<std::uint8_t>> messages;
  std::vector<std::uint32_t> decoded;  // float bits: NaN-safe equality
  bool operator==(const Encodings&) const = default;
};

// Three rounds (stateful codecs carry error feedback or momentum between them) on a layout of
// several layers, sizes off every lane multiple, with some large values for the clipping codecs.
Encodings run(const std::string& spec) {
  const auto layout = GradientLayout::from_sizes({{"conv", 4099}, {"empty", 0}, {"fc", 40000}, {"out", 3}}).value();
  auto codec = testing::codec(spec);
  Encodings out;
  std::vector<float> sum(layout.total_size(), 0.0f);
  for (std::uint64_t round = 0; round < 3; ++round) {
    auto gradient = testing::normal_values(layout.total_size(), 100 + round);
    gradient[17] = 40.0f;
    gradient[5000] = -25.0f;
    Rng rng(9, round);
    const auto encoded = codec->encode(gradient, layout, rng);
    EXPECT_TRUE(codec->decode_add(encoded.view(), layout, sum, 0.5f).ok()) << spec;
    out.messages.push_back(encoded.bytes);
  }
  out.decoded.resize(sum.size());
  std::memcpy(out.decoded.data(), sum.data(), sum.size() * sizeof(float));
  return out;
}

TEST(CodecIsaDispatch, EveryLevelEncodesAndDecodesTheScalarBits) {
  const auto levels = kernels::supported_isas();
  std::vector<std::string> specs = codec_names();
  specs.push_back("qsgd:s=16,granularity=layer");
  specs.push_back("terngrad:clip=2.5");
  specs.push_back("threshold:tau=0.5");
  specs.push_back("dgc:ratio=0.05,clip=1");
  std::size_t checked = 0;
  for (const auto& spec : specs) {
    if (!make_codec(spec).ok()) continue;  // a name that needs options: covered by its own tests
    ++checked;
    Encodings scalar;
    {
      kernels::ScopedIsaLimit cap(kernels::Isa::kScalar);
      scalar = run(spec);
    }
    for (const auto isa : levels) {
      kernels::ScopedIsaLimit cap(isa);
      EXPECT_TRUE(run(spec) == scalar) << spec << " at " << kernels::isa_name(isa);
    }
  }
  EXPECT_GE(checked, codec_names().size());  // every registered codec (threshold through its spec)
  if (levels.size() == 1) GTEST_SKIP() << "only the scalar level on this CPU: nothing to compare it with";
}

}  // namespace
}  // namespace ballot::coding
