// The order of the codecs' double sums (coding/detail/codec_logic.h), which the CUDA encoders
// reproduce: the dispatched reductions of coding/detail/blocks.h equal a direct, independent
// implementation of the documented order, bit for bit, at every ISA level and at sizes around the
// lane and chunk boundaries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "coding/detail/blocks.h"
#include "coding/detail/codec_logic.h"
#include "coding/wire_format.h"
#include "kernels/isa.h"
#include "tests/coding/codec_test_util.h"

namespace ballot::coding::detail {
namespace {

// Σ term(x_i): lanes j = i mod 16 within each 4096-coordinate chunk, lanes added 0..15 from +0.0,
// chunk sums added pairwise level by level (an odd last one carried up).
template <typename Term>
double documented_sum(const std::vector<float>& x, Term term) {
  std::vector<double> level;
  for (std::size_t start = 0; start < x.size(); start += 4096) {
    double lanes[16] = {};
    for (std::size_t i = start; i < std::min(x.size(), start + 4096); ++i) lanes[(i - start) % 16] += term(x[i]);
    double chunk = 0.0;
    for (double lane : lanes) chunk += lane;
    level.push_back(chunk);
  }
  if (level.empty()) return 0.0;
  while (level.size() > 1) {
    std::vector<double> next;
    for (std::size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(level[i] + level[i + 1]);
    if (level.size() % 2 != 0) next.push_back(level.back());
    level = next;
  }
  return level[0];
}

std::uint64_t bits_of(double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, 8);
  return bits;
}

TEST(CodecSumOrder, DispatchedSumsFollowTheDocumentedOrder) {
  for (const std::size_t n :
       std::vector<std::size_t>{0, 1, 15, 16, 17, 4095, 4096, 4097, 3 * 4096 + 5, 7 * 4096, 100003}) {
    auto x = testing::normal_values(n, 40 + n);
    // Magnitudes over many binades, so that the order shows in the rounding.
    for (std::size_t i = 0; i < n; ++i) x[i] *= std::ldexp(1.0f, static_cast<int>(i % 37) - 18);
    const double squares = documented_sum(x, [](float v) { return static_cast<double>(v) * v; });
    const double values = documented_sum(x, [](float v) { return static_cast<double>(v); });
    const double magnitudes = documented_sum(x, [](float v) { return std::fabs(static_cast<double>(v)); });
    for (const auto isa : kernels::supported_isas()) {
      kernels::ScopedIsaLimit cap(isa);
      SCOPED_TRACE(::testing::Message() << "n = " << n << " at " << kernels::isa_name(isa));
      EXPECT_EQ(bits_of(sum_squares(x.data(), n)), bits_of(squares));
      EXPECT_EQ(bits_of(sum_values(x.data(), n)), bits_of(values));
      EXPECT_EQ(bits_of(sum_abs(x.data(), n)), bits_of(magnitudes));
      const Moments moments = detail::moments(x.data(), n);
      EXPECT_EQ(bits_of(moments.sum_squares), bits_of(squares));
      EXPECT_EQ(bits_of(moments.sum), bits_of(values));
      EXPECT_EQ(moments.max_abs, max_abs(x.data(), n));
    }
  }
}

// The one-pass sign encoders (scaled sign's Σ|x|, 1-bit SGD's sums of the two sides) feed the sums
// block piece by block piece: any cut of a segment into pieces gives the documented order's bits
// for the whole segment, at every ISA level (pieces of 1, 15, 17 coordinates start runs anywhere in
// a lane group; pieces of 8192 are the encoder's blocks). Σ|x| is also sum_abs's bits.
TEST(CodecSumOrder, ChunkedSumOfPiecesIsTheSumOfTheWhole) {
  using Term = ChunkedSum::Term;
  const auto term_of = [](Term term) {
    return [term](float v) {
      const double x = v;
      if (term == Term::kAbs) return std::fabs(x);
      if (term == Term::kNonNegative) return v < 0.0f ? 0.0 : x;
      return v < 0.0f ? x : 0.0;
    };
  };
  for (const std::size_t n : std::vector<std::size_t>{0, 1, 17, 4096, 4097, 3 * 4096 + 5, 40000}) {
    auto x = testing::normal_values(n, 70 + n);
    for (std::size_t i = 0; i < n; ++i) x[i] *= std::ldexp(1.0f, static_cast<int>(i % 41) - 20);
    const std::vector<float> head(x.begin(), x.begin() + std::min<std::size_t>(n, 3));
    for (const Term term : {Term::kAbs, Term::kNonNegative, Term::kNegative}) {
      const double whole = documented_sum(x, term_of(term));
      const double of_head = documented_sum(head, term_of(term));
      if (term == Term::kAbs) {
        EXPECT_EQ(bits_of(sum_abs(x.data(), n)), bits_of(whole));
      }
      for (const auto isa : kernels::supported_isas()) {
        kernels::ScopedIsaLimit cap(isa);
        for (const std::size_t piece : {1, 15, 17, 100, 4095, 8192}) {
          SCOPED_TRACE(::testing::Message() << "term " << static_cast<int>(term) << ", n = " << n << ", pieces of "
                                            << piece << " at " << kernels::isa_name(isa));
          ChunkedSum sum(term);
          for (std::size_t at = 0; at < n; at += piece) sum.add(x.data() + at, std::min(piece, n - at));
          EXPECT_EQ(bits_of(sum.total()), bits_of(whole));
          sum.add(head.data(), head.size());  // empty again after total()
          EXPECT_EQ(bits_of(sum.total()), bits_of(of_head));
        }
      }
    }
  }
}

TEST(CodecSumOrder, PairwiseTotalCarriesAnOddLastSumUp) {
  std::vector<double> v = {1.0, 2.0, 4.0, 8.0, 16.0};
  // ((1 + 2) + (4 + 8)) + 16, with the odd 16 carried up two levels.
  EXPECT_EQ(pairwise_total(v.data(), v.size()), 31.0);
  std::vector<double> big = {1e17, 1.0, -1e17, 1.0};
  // (1e17 + 1) + (−1e17 + 1) = 1e17 − 1e17 = 0 in double (each 1 lost to rounding); left to
  // right it would be 1.
  EXPECT_EQ(pairwise_total(big.data(), big.size()), 0.0);
  EXPECT_EQ(pairwise_total(nullptr, 0), 0.0);
}

// A per-segment float that comes out NaN goes on the wire as 0x7FC00000 whatever NaN entered the
// sum: x86 keeps an input NaN's sign and payload, a GPU writes its own, and the encodings of both
// must be the same bytes.
TEST(CodecSumOrder, ANanOnTheWireIsOnePattern) {
  const auto bits = [](float v) {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  };
  const auto nan = [](std::uint32_t b) {
    float v;
    std::memcpy(&v, &b, 4);
    return v;
  };
  for (const std::uint32_t pattern : {0xFFC00000u, 0x7FC00001u, 0xFFFFFFFFu, 0x7FFFFFFFu, 0x7FC00000u}) {
    SCOPED_TRACE(pattern);
    const double sum = static_cast<double>(nan(pattern));
    EXPECT_EQ(bits(wire_float(nan(pattern))), 0x7FC00000u);
    EXPECT_EQ(bits(scaled_sign_scale(sum, 10)), 0x7FC00000u);
    EXPECT_EQ(bits(qsgd_factors(sum, 16.0f).norm), 0x7FC00000u);
    EXPECT_EQ(bits(terngrad_factors(nan(pattern), 0.0, 0.0, 10, 0.0f).scale), 0x7FC00000u);
  }
  EXPECT_EQ(bits(wire_float(-0.0f)), 0x80000000u);  // numbers keep their bits
  EXPECT_EQ(bits(scaled_sign_scale(std::numeric_limits<double>::infinity(), 3)), 0x7F800000u);
  // Through the CPU codecs: a gradient holding −NaN writes the one pattern in the scale or norm.
  std::vector<float> x(100, 0.5f);
  x[7] = nan(0xFFC00000u);
  for (const char* spec : {"scaled_sign", "qsgd:s=4,elias=0,granularity=model", "terngrad:granularity=model"}) {
    SCOPED_TRACE(spec);
    auto codec = testing::codec(spec);
    Rng rng(1);
    const auto encoded = codec->encode(x, GradientLayout::whole(x.size()), rng);
    const std::size_t at = std::string(spec).starts_with("qsgd") ? kHeaderBytes + 4 : kHeaderBytes;
    std::uint32_t written;
    std::memcpy(&written, encoded.bytes.data() + at, 4);
    EXPECT_EQ(written, 0x7FC00000u);
  }
}

}  // namespace
}  // namespace ballot::coding::detail
