#include "coding/allocation_matrix.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace ballot::coding {
namespace {

TEST(AllocationMatrix, IdentityIsSignSgdWithMajorityVote) {
  const auto g = AllocationMatrix::identity(7);
  EXPECT_EQ(g.n(), 7u);
  EXPECT_EQ(g.ones(), 7u);
  EXPECT_DOUBLE_EQ(g.redundancy(), 1.0);
  for (std::size_t i = 0; i < 7; ++i) EXPECT_EQ(g.row(i), std::vector<std::uint32_t>{static_cast<std::uint32_t>(i)});
}

TEST(AllocationMatrix, PaperCodeHasRedundancyThreePointEight) {
  const auto g = AllocationMatrix::paper_n5();
  EXPECT_EQ(g.ones(), 19u);
  EXPECT_DOUBLE_EQ(g.redundancy(), 3.8);
  EXPECT_EQ(g.row(0), (std::vector<std::uint32_t>{0}));
  EXPECT_EQ(g.row(1), (std::vector<std::uint32_t>{1, 2, 3}));
  for (std::size_t i = 2; i < 5; ++i) EXPECT_EQ(g.row_size(i), 5u);
  EXPECT_EQ(g.column(4), (std::vector<std::uint32_t>{2, 3, 4}));
}

TEST(AllocationMatrix, GeneralConstructionReproducesPaperCodeAndCountsOnes) {
  EXPECT_EQ(AllocationMatrix::deterministic(5, 1).value(), AllocationMatrix::paper_n5());
  for (std::size_t n = 1; n <= 31; n += 2) {
    for (std::size_t b = 0; 2 * b + 1 <= n; ++b) {
      const auto g = AllocationMatrix::deterministic(n, b).value();
      const std::size_t half_l = (n - 2 * b - 1) / 2;
      EXPECT_EQ(g.ones(), (2 * b + 1) * n + half_l * (n - 1)) << n << " " << b;
    }
  }
  EXPECT_EQ(AllocationMatrix::deterministic(7, 1).value().ones(), 33u);  // ALGORITHMS.md §3
}

TEST(AllocationMatrix, GeneralConstructionRejectsEvenNAndTooLargeB) {
  EXPECT_EQ(AllocationMatrix::deterministic(6, 1).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(AllocationMatrix::deterministic(7, 4).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(AllocationMatrix::deterministic(0, 0).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(AllocationMatrix::deterministic(5, std::size_t{1} << 63).error().code, ErrorCode::kInvalidArgument);
}

TEST(AllocationMatrix, BernoulliIsReproducibleHasNoEmptyRowAndOvershootsNominalR) {
  const auto a = AllocationMatrix::bernoulli(15, 2.0, 42).value();
  const auto b = AllocationMatrix::bernoulli(15, 2.0, 42).value();
  const auto c = AllocationMatrix::bernoulli(15, 2.0, 43).value();
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a == c);
  // The row-redraw rule conditions on non-empty rows: E[r] = n p / (1 − (1−p)^n) ≈ 2.28 at
  // (n = 15, r = 2) and ≈ 2.24 at n = 9 (ALGORITHMS.md: "≈ 2.25").
  for (const std::size_t n : {9u, 15u}) {
    double total = 0;
    constexpr int kDraws = 400;
    for (int s = 0; s < kDraws; ++s) {
      const auto g = AllocationMatrix::bernoulli(n, 2.0, static_cast<std::uint64_t>(s)).value();
      for (std::size_t i = 0; i < n; ++i) ASSERT_GT(g.row_size(i), 0u);
      total += g.redundancy();
    }
    const double p = 2.0 / static_cast<double>(n);
    const double expected = 2.0 / (1.0 - std::pow(1.0 - p, static_cast<double>(n)));
    EXPECT_NEAR(expected, 2.25, 0.02);
    EXPECT_NEAR(total / kDraws, expected, 0.05) << "n = " << n;  // ~3 standard errors
  }
}

TEST(AllocationMatrix, BernoulliRejectsBadArguments) {
  EXPECT_FALSE(AllocationMatrix::bernoulli(0, 2.0, 1).ok());
  EXPECT_FALSE(AllocationMatrix::bernoulli(5, 0.0, 1).ok());
  EXPECT_FALSE(AllocationMatrix::bernoulli(5, 6.0, 1).ok());
  EXPECT_FALSE(AllocationMatrix::bernoulli(5, std::nan(""), 1).ok());
  EXPECT_EQ(AllocationMatrix::bernoulli(16, 0.0005, 1).error().code, ErrorCode::kPrecondition);
}

TEST(AllocationMatrix, FromRowsValidates) {
  EXPECT_TRUE(AllocationMatrix::from_rows(2, {{0, 1}, {}}).ok());
  EXPECT_FALSE(AllocationMatrix::from_rows(2, {{0, 2}, {}}).ok());
  EXPECT_FALSE(AllocationMatrix::from_rows(2, {{0, 0}, {}}).ok());
  EXPECT_FALSE(AllocationMatrix::from_rows(2, {{0}}).ok());
}

TEST(AllocationMatrix, TextRoundTripAndTolerantSyntax) {
  const auto g = AllocationMatrix::deterministic(9, 2).value();
  EXPECT_EQ(AllocationMatrix::parse(g.to_text()).value(), g);
  const auto parsed =
      AllocationMatrix::parse("# the paper's code\n\n10000\n0 1 1 1 0\n1,1,1,1,1\r\n11111  # full\n\t1 1 1 1 1\n");
  ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
  EXPECT_EQ(parsed.value(), AllocationMatrix::paper_n5());
}

TEST(AllocationMatrix, MalformedTextNamesTheLine) {
  const struct {
    const char* text;
    const char* fragment;
  } cases[] = {
      {"", "no rows"},
      {"# only a comment\n", "no rows"},
      {"10\n0x\n", "line 2: unexpected 'x' at column 2"},
      {"100\n01\n001\n", "line 2: 2 entries, but the row on line 1 has 3"},
      {"10\n01\n11\n", "line 3: more rows than the 2 entries"},
      {"100\n010\n", "2 rows of 3 entries"},
      {"1\xff\n", "byte 255"},
  };
  for (const auto& c : cases) {
    const auto result = AllocationMatrix::parse(c.text);
    ASSERT_FALSE(result.ok()) << c.text;
    EXPECT_EQ(result.error().code, ErrorCode::kMalformed);
    EXPECT_NE(result.error().message.find(c.fragment), std::string::npos) << result.error().message;
  }
}

TEST(AllocationMatrix, SaveAndLoadFile) {
  const auto dir = std::filesystem::temp_directory_path() / "ballot_allocation_matrix_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "g.txt").string();
  const auto g = AllocationMatrix::bernoulli(11, 3.0, 5).value();
  ASSERT_TRUE(g.save(path).ok());
  EXPECT_EQ(AllocationMatrix::load(path).value(), g);
  EXPECT_EQ(AllocationMatrix::load((dir / "absent.txt").string()).error().code, ErrorCode::kNotFound);
  const auto fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);  // no writer: a read would never end
  const auto from_fifo = AllocationMatrix::load(fifo.string());
  ASSERT_FALSE(from_fifo.ok());
  EXPECT_NE(from_fifo.error().message.find(fifo.string()), std::string::npos) << from_fifo.error().message;
  { std::ofstream(path) << "1 0\n0 2\n"; }
  const auto bad = AllocationMatrix::load(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find(path), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(AllocationMatrix, SpecFactory) {
  const auto spec = [](const char* text) { return Spec::parse(text).value(); };
  EXPECT_EQ(make_allocation_matrix(spec("identity"), 5, 1).value(), AllocationMatrix::identity(5));
  EXPECT_EQ(make_allocation_matrix(spec("paper5"), 5, 1).value(), AllocationMatrix::paper_n5());
  EXPECT_EQ(make_allocation_matrix(spec("deterministic:b=2"), 9, 1).value(),
            AllocationMatrix::deterministic(9, 2).value());
  EXPECT_EQ(make_allocation_matrix(spec("bernoulli:r=3,seed=9"), 15, 1).value(),
            AllocationMatrix::bernoulli(15, 3.0, 9).value());
  EXPECT_EQ(make_allocation_matrix(spec("bernoulli:r=3"), 15, 9).value(),
            AllocationMatrix::bernoulli(15, 3.0, 9).value());
  EXPECT_FALSE(make_allocation_matrix(spec("paper5"), 7, 1).ok());
  EXPECT_FALSE(make_allocation_matrix(spec("identity:x=1"), 5, 1).ok());
  EXPECT_FALSE(make_allocation_matrix(spec("fountain"), 5, 1).ok());
  EXPECT_FALSE(make_allocation_matrix(spec("deterministic:b=-1"), 5, 1).ok());
  EXPECT_FALSE(make_allocation_matrix(spec("file"), 5, 1).ok());
  EXPECT_FALSE(make_allocation_matrix(spec("identity"), 0, 1).ok());

  // A code file without a 1 would have every node vote on nothing.
  const auto path = std::filesystem::temp_directory_path() / ("ballot_zero_code_" + std::to_string(::getpid()));
  { std::ofstream(path) << "0 0 0\n0 0 0\n0 0 0\n"; }
  const auto zero = make_allocation_matrix(spec(("file:path=" + path.string()).c_str()), 3, 1);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message.find("no node would compute any partition"), std::string::npos)
      << zero.error().message;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ballot::coding
