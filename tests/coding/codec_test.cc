// Properties every codec must have, for every registered codec and both granularities: exact (or
// bounded) size, decode == decode_add into zeros, weighted accumulation, determinism for a fixed
// stream, hostile bytes (every truncation, trailing bytes, corrupted header, random bit flips)
// returning errors without touching the accumulator, and state round trips.
#include "coding/codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "codec_test_util.h"
#include "coding/codec_registry.h"
#include "coding/wire_format.h"

namespace ballot::coding {
namespace {

using testing::codec;
using testing::mixed_layout;
using testing::normal_values;

class EveryCodec : public ::testing::TestWithParam<std::string> {};

std::vector<GradientLayout> layouts() {
  return {GradientLayout::whole(1), GradientLayout::whole(64), GradientLayout::whole(1000), mixed_layout(),
          GradientLayout::whole(0)};
}

TEST_P(EveryCodec, SizeMatchesWireSizeAndDecodeRoundTrips) {
  auto c = codec(GetParam());
  for (const auto& layout : layouts()) {
    const auto g = normal_values(layout.total_size(), 3);
    Rng rng(11, 5);
    const EncodedGradient encoded = c->encode(g, layout, rng);
    if (c->exact_wire_size()) {
      EXPECT_EQ(encoded.size(), c->wire_size(layout)) << GetParam() << " d=" << layout.total_size();
    } else {
      EXPECT_LE(encoded.size(), c->wire_size(layout)) << GetParam();
    }
    EXPECT_EQ(c->wire_size(layout.total_size()), c->wire_size(GradientLayout::whole(layout.total_size())));
    const auto decoded = c->decode(encoded.bytes, layout);
    ASSERT_TRUE(decoded.ok()) << GetParam() << ": " << decoded.error().to_string();
    ASSERT_EQ(decoded->size(), g.size());
    for (float v : *decoded) EXPECT_TRUE(std::isfinite(v));

    // decode_add accumulates weight * decoded into what is there.
    std::vector<float> acc(g.size(), 0.5f);
    ASSERT_TRUE(c->decode_add(encoded.bytes, layout, acc, -2.0f).ok());
    for (std::size_t i = 0; i < g.size(); ++i) {
      EXPECT_FLOAT_EQ(acc[i], 0.5f - 2.0f * (*decoded)[i]) << GetParam() << " i=" << i;
    }
  }
}

TEST_P(EveryCodec, DeterministicForAFixedStreamAndAdvancesIt) {
  const auto layout = mixed_layout();
  const auto g = normal_values(layout.total_size(), 4);
  auto a = codec(GetParam());
  auto b = codec(GetParam());
  Rng ra(9, 1), rb(9, 1);
  EXPECT_EQ(a->encode(g, layout, ra).bytes, b->encode(g, layout, rb).bytes);
  EXPECT_EQ(ra.position(), rb.position());
}

TEST_P(EveryCodec, AnyInstanceOfTheFamilyDecodes) {
  // The decoder reads granularity and parameters from the wire, not from its own options.
  const auto layout = mixed_layout();
  const auto g = normal_values(layout.total_size(), 5);
  auto encoder = codec(GetParam());
  Rng rng(1);
  const auto encoded = encoder->encode(g, layout, rng);
  auto fresh = codec(GetParam());
  const auto a = encoder->decode(encoded.bytes, layout);
  const auto b = fresh->decode(encoded.bytes, layout);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST_P(EveryCodec, EveryTruncationAndTrailingByteIsAnErrorAndLeavesTheAccumulator) {
  auto c = codec(GetParam());
  const auto layout = mixed_layout();
  const auto g = normal_values(layout.total_size(), 6);
  Rng rng(2);
  const auto encoded = c->encode(g, layout, rng);
  const std::vector<float> before(g.size(), 1.25f);
  for (std::size_t length = 0; length < encoded.size(); ++length) {
    std::vector<float> acc = before;
    const auto status = c->decode_add(std::span(encoded.bytes).first(length), layout, acc);
    ASSERT_FALSE(status.ok()) << GetParam() << " accepted " << length << " of " << encoded.size();
    EXPECT_EQ(status.error().code, ErrorCode::kMalformed);
    ASSERT_EQ(acc, before);
  }
  auto longer = encoded.bytes;
  longer.push_back(0);
  std::vector<float> acc = before;
  EXPECT_FALSE(c->decode_add(longer, layout, acc).ok()) << GetParam();
  EXPECT_EQ(acc, before);
}

TEST_P(EveryCodec, CorruptedHeaderIsAnError) {
  auto c = codec(GetParam());
  const auto layout = mixed_layout();
  const auto g = normal_values(layout.total_size(), 7);
  Rng rng(3);
  const auto encoded = c->encode(g, layout, rng);
  for (std::size_t byte = 0; byte < kHeaderBytes; ++byte) {
    if (byte == 4) continue;  // granularity: the other value is a valid message for some codecs
    auto bad = encoded.bytes;
    bad[byte] ^= 0x20;
    if (byte == 5) bad[byte] = 0x80;  // an unknown flag bit
    std::vector<float> acc(g.size(), 0.0f);
    EXPECT_FALSE(c->decode_add(bad, layout, acc).ok()) << GetParam() << " header byte " << byte;
  }
  // The same d split differently is a different layout.
  const auto other = GradientLayout::from_sizes({{"x", 200}, {"y", 66}}).value();
  std::vector<float> acc(g.size(), 0.0f);
  EXPECT_FALSE(c->decode_add(encoded.bytes, other, acc).ok());
}

TEST_P(EveryCodec, RandomCorruptionNeverCrashes) {
  // Under ASan/UBSan this shows that no flip reads or writes out of bounds; an accepted message
  // must decode to exactly what decode_add adds.
  auto c = codec(GetParam());
  const auto layout = mixed_layout();
  const auto g = normal_values(layout.total_size(), 8);
  Rng rng(4);
  const auto encoded = c->encode(g, layout, rng);
  Rng flips(99, 3);
  int accepted = 0;
  for (int trial = 0; trial < 300; ++trial) {
    auto bad = encoded.bytes;
    const int edits = 1 + static_cast<int>(flips.uniform_int(4));
    for (int e = 0; e < edits; ++e) {
      const auto at = kHeaderBytes + flips.uniform_int(bad.size() - kHeaderBytes);
      bad[at] ^= static_cast<std::uint8_t>(1u << flips.uniform_int(8));
    }
    std::vector<float> acc(g.size(), 0.0f);
    const auto status = c->decode_add(bad, layout, acc);
    if (!status.ok()) {
      EXPECT_EQ(acc, std::vector<float>(g.size(), 0.0f));
    } else {
      ++accepted;
    }
  }
  SUCCEED() << accepted << " corrupted messages were valid encodings";
}

TEST_P(EveryCodec, StateSavesAndRestores) {
  const auto layout = mixed_layout();
  auto a = codec(GetParam());
  Rng rng(5);
  for (int step = 0; step < 3; ++step) (void)a->encode(normal_values(layout.total_size(), 20 + step), layout, rng);
  const auto state = a->save_state();
  EXPECT_EQ(state.empty(), !a->stateful()) << GetParam();
  auto b = codec(GetParam());
  ASSERT_TRUE(b->load_state(state, layout).ok());
  EXPECT_EQ(b->save_state(), state);
  // Same state, same stream, same input: same message.
  const auto g = normal_values(layout.total_size(), 30);
  Rng ra(6), rb(6);
  EXPECT_EQ(a->encode(g, layout, ra).bytes, b->encode(g, layout, rb).bytes) << GetParam();
  if (a->stateful()) {
    // A truncated or foreign state blob is refused and changes nothing.
    const auto saved = b->save_state();
    for (std::size_t length : {std::size_t{0}, std::size_t{7}, state.size() / 2, state.size() - 1}) {
      EXPECT_FALSE(b->load_state(std::span(state).first(length), layout).ok()) << length;
    }
    EXPECT_FALSE(b->load_state(state, GradientLayout::whole(layout.total_size() + 1)).ok());
    EXPECT_EQ(b->save_state(), saved);
    b->reset_state();
    auto fresh = codec(GetParam());
    Rng rc(7), rd(7);
    EXPECT_EQ(b->encode(g, layout, rc).bytes, fresh->encode(g, layout, rd).bytes);
  } else {
    EXPECT_FALSE(b->load_state(std::vector<std::uint8_t>{1, 2, 3}, layout).ok());
  }
}

TEST_P(EveryCodec, NonFiniteInputNeverCrashes) {
  auto c = codec(GetParam());
  const auto layout = mixed_layout();
  auto g = normal_values(layout.total_size(), 9);
  g[3] = std::numeric_limits<float>::quiet_NaN();
  g[100] = std::numeric_limits<float>::infinity();
  g[200] = -std::numeric_limits<float>::infinity();
  Rng rng(8);
  const auto encoded = c->encode(g, layout, rng);
  const auto decoded = c->decode(encoded.bytes, layout);
  ASSERT_TRUE(decoded.ok()) << GetParam();
  // As docs/codecs.md says: the sign codecs send ±1 only; random-k carries a non-finite value only
  // where it samples one; every other codec carries them on to the decoded vector.
  const CodecId id = c->id();
  const auto non_finite = std::count_if(decoded->begin(), decoded->end(), [](float v) { return !std::isfinite(v); });
  if (id == CodecId::kSign || id == CodecId::kSignum) {
    for (const float v : *decoded) ASSERT_TRUE(v == 1.0f || v == -1.0f) << GetParam();
  } else if (id != CodecId::kRandomK) {
    EXPECT_GT(non_finite, 0) << GetParam();
  }
  // State does not keep them: the next clean gradient decodes to finite values.
  const auto clean = normal_values(layout.total_size(), 10);
  const auto next = c->decode(c->encode(clean, layout, rng).bytes, layout);
  ASSERT_TRUE(next.ok()) << GetParam();
  for (const float v : *next) ASSERT_TRUE(std::isfinite(v)) << GetParam();
}

// decode_entries() is decode() as entries: strictly rising indices, and written out, the decoded
// vector bit for bit (a −0 and a NaN on the wire included). The sparsifying codecs read the entries
// from the message, so they list at most what it carries (4 bytes or more each); every truncation
// is an error, as for decode().
TEST_P(EveryCodec, EntriesAreTheDecodedVector) {
  auto c = codec(GetParam());
  const CodecId id = c->id();
  const bool sparse = id == CodecId::kTopK || id == CodecId::kRandomK || id == CodecId::kThreshold ||
                      id == CodecId::kGlobalTopK || id == CodecId::kDgc;
  EXPECT_EQ(c->sparse_decode(), sparse) << GetParam();
  for (const auto& layout : layouts()) {
    auto g = normal_values(layout.total_size(), 12);
    for (std::size_t i = 0; i < g.size(); i += 7) g[i] = i % 2 ? -0.0f : 0.0f;
    if (g.size() > 20) g[20] = -std::numeric_limits<float>::quiet_NaN();
    Rng rng(3, 9);
    const EncodedGradient encoded = c->encode(g, layout, rng);
    const auto decoded = c->decode(encoded.bytes, layout);
    const auto entries = c->decode_entries(encoded.bytes, layout);
    ASSERT_TRUE(decoded.ok() && entries.ok()) << GetParam();
    ASSERT_EQ(entries->indices.size(), entries->values.size());
    std::vector<float> written(g.size(), 0.0f);
    for (std::size_t j = 0; j < entries->indices.size(); ++j) {
      ASSERT_LT(entries->indices[j], g.size()) << GetParam();
      if (j > 0) {
        ASSERT_GT(entries->indices[j], entries->indices[j - 1]) << GetParam();
      }
      written[entries->indices[j]] = entries->values[j];
    }
    // Bit for bit (memcmp, not ==: −0 and NaN), and never on the null data of an empty vector.
    EXPECT_TRUE(g.empty() || std::memcmp(written.data(), decoded->data(), g.size() * sizeof(float)) == 0)
        << GetParam() << " d=" << g.size();
    if (sparse) {
      EXPECT_LE(4 * entries->indices.size(), encoded.size()) << GetParam();
    }
    for (std::size_t cut = 0; cut < encoded.size(); cut += std::max<std::size_t>(1, encoded.size() / 13)) {
      const std::span<const std::uint8_t> truncated(encoded.bytes.data(), cut);
      EXPECT_FALSE(c->decode_entries(truncated, layout).ok()) << GetParam() << " cut " << cut;
    }
  }
}

// Every line of the codec table at its example, with and without error feedback (where it may
// take it), then more variants: a new table line is covered without editing this file.
std::vector<std::string> every_spec() {
  std::vector<std::string> out;
  const auto add = [&out](std::string spec) {
    if (std::find(out.begin(), out.end(), spec) == out.end()) out.push_back(std::move(spec));
  };
  for (const CodecEntry& entry : codec_table()) add(std::string(entry.example));
  for (const char* spec : {"scaled_sign:granularity=model", "onebit:granularity=model,ef=0",
                           "topk:k=17,granularity=layer", "randomk:k=9,granularity=layer", "qsgd:s=5,granularity=layer",
                           "qsgd:s=1", "qsgd:s=16,elias=1", "qsgd:s=3,elias=1,granularity=layer",
                           "terngrad:clip=2.5,granularity=model", "scaled_sign:ef=1", "topk:ratio=0.05,ef=1",
                           "threshold:tau=0.5,ef=1", "dgc:ratio=0.1,momentum=0.5,clip=1,warmup=3,granularity=model"})
    add(spec);
  for (const CodecEntry& entry : codec_table()) {
    if (entry.properties.own_residual || entry.properties.error_feedback || entry.properties.unbiased) continue;
    const std::string example(entry.example);
    add(example + (example.find(':') == std::string::npos ? ":" : ",") + "ef=1");
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryCodec, ::testing::ValuesIn(every_spec()), [](const auto& info) {
  std::string name = info.param;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
});

}  // namespace
}  // namespace ballot::coding
