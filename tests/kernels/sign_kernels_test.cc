#include "kernels/sign_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "isa_test_util.h"
#include "kernels/detail/cpu_kernels.h"

namespace ballot::kernels {
namespace {

std::vector<float> random_values(std::size_t count, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> values(count);
  for (auto& v : values) v = static_cast<float>(rng.normal());
  return values;
}

BitVector reference_pack(const std::vector<float>& values) {
  BitVector bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits.set(i, !(values[i] < 0.0f));
  return bits;
}

class SignKernels : public PerIsaTest {};

// A level may run the kernel of the level below where that is faster on the CPU (the AVX-512
// level packs with the AVX2 kernel on AMD Zen 4), so the per-level tests above may not reach a
// table's own pack: each table this CPU can run is checked directly.
TEST(SignKernelTables, EveryLevelsOwnPackMatchesTheReference) {
  const detail::CpuKernels* const tables[] = {&detail::kScalarKernels,
                                              isa_supported(Isa::kAvx2) ? detail::kAvx2Kernels : nullptr,
                                              isa_supported(Isa::kAvx512) ? detail::kAvx512Kernels : nullptr};
  for (const detail::CpuKernels* table : tables) {
    if (table == nullptr) continue;
    for (std::size_t size : {1u, 63u, 64u, 65u, 128u, 129u, 1000u, (1u << 16) + 7}) {
      const auto values = random_values(size, size + 1);
      BitVector packed(size);
      table->pack(values.data(), size, packed.words().data());
      EXPECT_EQ(packed, reference_pack(values)) << isa_name(table->isa) << " size " << size;
    }
  }
  // The table the AVX-512 level runs packs with AVX2's kernel exactly where the CPU splits 512-bit
  // operations, and with its own elsewhere.
  if (const detail::CpuKernels* used = detail::cpu_kernels(Isa::kAvx512)) {
    EXPECT_EQ(used->pack, cpu_splits_512_bit_vectors() ? detail::kAvx2Kernels->pack : detail::kAvx512Kernels->pack);
    EXPECT_EQ(used->isa, Isa::kAvx512);
  }
}

TEST_P(SignKernels, PackMatchesReferenceAtBoundarySizes) {
  for (std::size_t size : {0u, 1u, 15u, 16u, 17u, 63u, 64u, 65u, 127u, 1000u, (1u << 20) + 3}) {
    const auto values = random_values(size, size);
    const BitVector packed = pack_signs(values);
    EXPECT_EQ(packed, reference_pack(values)) << "size " << size;
    EXPECT_TRUE(packed.padding_is_clear()) << "size " << size;
    BitVector reused(3);
    pack_signs(values, reused);
    EXPECT_EQ(reused, packed);
  }
}

TEST_P(SignKernels, UnpackRoundTripAtBoundarySizes) {
  for (std::size_t size : {0u, 1u, 63u, 64u, 65u, (1u << 20) + 3}) {
    const auto values = random_values(size, 100 + size);
    const BitVector packed = pack_signs(values);
    std::vector<float> out(size);
    unpack_signs(packed, out, 0.25f);
    for (std::size_t i = 0; i < size; ++i) {
      ASSERT_EQ(out[i], values[i] < 0.0f ? -0.25f : 0.25f) << "size " << size << " i " << i;
    }
    EXPECT_EQ(pack_signs(out), packed);
  }
}

// The documented rule: +0.0, -0.0 and NaN pack to +1; only strictly negative values to -1.
TEST_P(SignKernels, ZeroNegativeZeroAndNanPackToPlusOne) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float tiny = std::numeric_limits<float>::denorm_min();
  std::vector<float> values{0.0f, -0.0f, nan, -nan, inf, -inf, tiny, -tiny, 1.0f, -1.0f};
  // Repeat so the SIMD bodies (not just the scalar tails) see the special values.
  std::vector<float> many;
  for (int r = 0; r < 20; ++r) many.insert(many.end(), values.begin(), values.end());
  const BitVector packed = pack_signs(many);
  const bool expected[] = {true, true, true, true, true, false, true, false, true, false};
  for (std::size_t i = 0; i < many.size(); ++i) {
    EXPECT_EQ(packed.get(i), expected[i % 10]) << "value " << many[i] << " at " << i;
  }
}

TEST_P(SignKernels, PerLayerScalesUnpackEachSegment) {
  GradientLayout layout;
  layout.add_layer("a", 5);
  layout.add_layer("b", 70);
  layout.add_layer("c", 33);
  const auto values = random_values(layout.total_size(), 7);
  const BitVector packed = pack_signs(values);
  const std::vector<float> scales{1.0f, 0.5f, 3.0f};
  std::vector<float> out(layout.total_size());
  unpack_signs(packed, layout, scales, out);
  for (std::size_t l = 0; l < layout.num_layers(); ++l) {
    const auto& segment = layout.layer(l);
    for (std::size_t i = segment.offset; i < segment.offset + segment.size; ++i) {
      ASSERT_EQ(out[i], values[i] < 0.0f ? -scales[l] : scales[l]) << "i " << i;
    }
  }
}

TEST_P(SignKernels, AgreementCountsEqualSigns) {
  for (std::size_t size : {0u, 1u, 64u, 65u, 10007u}) {
    const BitVector a = pack_signs(random_values(size, 1));
    const BitVector b = pack_signs(random_values(size, 2));
    std::size_t expected = 0;
    for (std::size_t i = 0; i < size; ++i) expected += a.get(i) == b.get(i);
    EXPECT_EQ(agreement_count(a, b), expected) << "size " << size;
    EXPECT_EQ(agreement_count(a, a), size);
  }
}

BALLOT_INSTANTIATE_PER_ISA(SignKernels);

}  // namespace
}  // namespace ballot::kernels
