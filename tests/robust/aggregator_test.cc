#include "robust/aggregator.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "robust/detail/common.h"
#include "robust/registry.h"
#include "robust/sparse_inputs.h"
#include "robust_test_util.h"

namespace ballot::robust {
namespace {

TEST(InputMatrix, FromBuffer) {
  std::vector<float> data(12);
  auto view = InputMatrix::from_buffer(data, 3);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->n(), 3u);
  EXPECT_EQ(view->d(), 4u);
  EXPECT_EQ(view->row(2), data.data() + 8);
  EXPECT_EQ(view->uniform_stride(), 4u);
  auto bad = InputMatrix::from_buffer(data, 5);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(InputMatrix::from_buffer(data, 0).ok());
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif
#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

bool every_index_once(const std::vector<std::atomic<int>>& hits) {
  return std::all_of(hits.begin(), hits.end(), [](const std::atomic<int>& h) { return h.load() == 1; });
}

// The rules' threads: every index runs once, and an exception from a chunk on any thread reaches
// the caller once all have joined (not std::terminate).
TEST(ParallelFor, EveryIndexOnceAndExceptionsReachTheCaller) {
  for (const std::size_t threads : {1u, 3u, 7u, 2000u}) {
    std::vector<std::atomic<int>> hits(1000);
    detail::parallel_for(hits.size(), threads, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) ++hits[i];
    });
    EXPECT_TRUE(every_index_once(hits)) << threads;
  }
  std::atomic<int> ran{0};
  EXPECT_THROW(detail::parallel_for(100, 4,
                                    [&](std::size_t begin, std::size_t) {
                                      ++ran;
                                      if (begin == 50) throw std::runtime_error("chunk 2");
                                    }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 4);
}

// parallel_for over 64 chunks with room for about one more thread stack: the exit code is 0 when
// every index ran once and some threads could not start (so the calling thread ran their chunks).
int parallel_for_with_little_address_space() {
  std::size_t pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const rlim_t limit = pages * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (12u << 20);
  const rlimit address_space{limit, limit};
  if (::setrlimit(RLIMIT_AS, &address_space) != 0) return 3;
  std::vector<std::atomic<int>> hits(64);
  std::vector<std::thread::id> ran_on(64);
  detail::parallel_for(hits.size(), hits.size(), [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      ++hits[i];
      ran_on[i] = std::this_thread::get_id();
    }
  });
  std::sort(ran_on.begin(), ran_on.end());
  const auto threads = std::unique(ran_on.begin(), ran_on.end()) - ran_on.begin();
  if (threads >= 64) return 2;  // every thread started: the limit did not bite
  return every_index_once(hits) ? 0 : 1;
}

// Threads that cannot start (here: no address space left for their stacks) leave their chunks to
// the calling thread: the result is the same, the process goes on.
TEST(ParallelFor, ThreadsThatCannotStartLeaveTheirChunksToTheCaller) {
  if (kAddressSanitizer || kThreadSanitizer)
    GTEST_SKIP() << "the sanitizers reserve more address space than any limit leaves";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(::_exit(parallel_for_with_little_address_space()), ::testing::ExitedWithCode(0), "");
}

// A pre-aggregator's output block is 64-byte aligned, filled only when asked, and a large one is
// reused by the next output of the same size (except under AddressSanitizer, which must see every
// free to catch a use after it).
TEST(Matrix, ValuesAreAlignedFilledOnRequestAndLargeBlocksReused) {
  const std::size_t count = detail::kRecycledBytes / sizeof(float) + 3;
  const float* first = nullptr;
  {
    Matrix m;
    m.values.resize(count, 2.5f);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(m.values.data()) % 64, 0u);
    EXPECT_TRUE(std::all_of(m.values.begin(), m.values.end(), [](float v) { return v == 2.5f; }));
    first = m.values.data();
  }
  Matrix again;
  again.values.resize(count);
  if (!kAddressSanitizer) {
    EXPECT_EQ(again.values.data(), first);
  }
  Matrix small;
  small.values.assign(5, 1.0f);
  EXPECT_EQ(small.values, (decltype(small.values){1, 1, 1, 1, 1}));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small.values.data()) % 64, 0u);
}

TEST(InputMatrix, FromRowsChecksSizes) {
  std::vector<std::vector<float>> rows{{1, 2}, {3, 4}, {5}};
  auto bad = InputMatrix::from_rows(rows);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("input 2"), std::string::npos) << bad.error().message;
  rows[2].push_back(6);
  auto good = InputMatrix::from_rows(rows);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->row_span(1)[1], 4.0f);
}

TEST(InputMatrix, SubsetAndStride) {
  std::vector<float> data(20);
  const InputMatrix view(data.data(), 5, 4);
  const std::vector<std::size_t> pick{1, 3, 4};
  const auto sub = view.subset(pick);
  EXPECT_EQ(sub.n(), 3u);
  EXPECT_EQ(sub.row(1), data.data() + 12);
  EXPECT_EQ(sub.uniform_stride(), 0u);  // rows 1, 3, 4 are not equally spaced
  const std::vector<std::size_t> even{0, 2, 4};
  EXPECT_EQ(view.subset(even).uniform_stride(), 8u);
}

}  // namespace
}  // namespace ballot::robust

// ---- Properties every rule shares, over the registry's rules and pipelines -------------------

namespace ballot::robust {
namespace {

constexpr std::size_t kN = 11, kF = 2, kD = 64;

// Every rule of the registry's table at its example with f = 2, every pre-aggregator before
// median:f=2, and a few more pipelines: a new table line is covered without editing this file.
std::vector<std::string> every_spec() {
  std::vector<std::string> out;
  const auto add = [&out](std::string spec) {
    if (std::find(out.begin(), out.end(), spec) == out.end()) out.push_back(std::move(spec));
  };
  for (const RuleEntry& entry : rule_table()) add(example_with_f(entry, kF));
  for (const PreAggregatorEntry& entry : pre_aggregator_table()) add(example_with_f(entry, kF) + " > median:f=2");
  for (const char* spec : {"nnm:f=2 > krum:f=2", "arc:f=2 > krum:f=2", "clipping:tau=100 > trimmed_mean:f=2"})
    add(spec);
  return out;
}

// The same spec with threads=N on every stage.
std::string with_threads(const std::string& spec, int threads) {
  std::string out, stage;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = spec.find('>', begin);
    stage = spec.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    while (!stage.empty() && stage.back() == ' ') stage.pop_back();
    out += stage + (stage.find(':') == std::string::npos ? ":" : ",") + "threads=" + std::to_string(threads);
    if (end == std::string::npos) break;
    out += " > ";
    begin = end + 1;
  }
  return out;
}

class EveryRule : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Aggregator> make(const std::string& spec) const {
    auto rule = make_aggregator(spec);
    EXPECT_TRUE(rule.ok()) << spec << ": " << rule.error().to_string();
    return rule.ok() ? std::move(rule).value() : nullptr;
  }
  std::string spec() const { return GetParam(); }
  bool is_mean() const { return spec() == "mean"; }
  bool is_random() const { return spec().find("bucketing") != std::string::npos; }
};

TEST_P(EveryRule, IdenticalAcrossRunsAndThreadCounts) {
  const auto rows = testing::gaussian_rows(kN, 9000, 1);
  const InputMatrix view(rows.data(), kN, 9000);
  auto a = make(spec())->aggregate(view);
  auto b = make(spec())->aggregate(view);
  auto c = make(with_threads(spec(), 2))->aggregate(view);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << spec();
  EXPECT_EQ(a->value, b->value);
  EXPECT_EQ(a->value, c->value);
}

TEST_P(EveryRule, PermutationInvariant) {
  if (is_random()) GTEST_SKIP() << "bucketing draws a random permutation by design";
  const auto rows = testing::gaussian_rows(kN, kD, 2, 1.0, 1.0);
  std::vector<float> reversed(rows.size());
  for (std::size_t i = 0; i < kN; ++i) std::copy_n(rows.begin() + i * kD, kD, reversed.begin() + (kN - 1 - i) * kD);
  auto a = make(spec())->aggregate(InputMatrix(rows.data(), kN, kD));
  auto b = make(spec())->aggregate(InputMatrix(reversed.data(), kN, kD));
  ASSERT_TRUE(a.ok() && b.ok());
  if (spec().rfind("mda", 0) == 0) {
    // A diameter is set by one pair, so many subsets share the minimum: ties go to the lowest
    // indices, and the invariant is the minimum diameter itself.
    EXPECT_NEAR(b->report.scores[0], a->report.scores[0], 1e-4 * a->report.scores[0]);
    return;
  }
  if (spec().rfind("bulyan", 0) == 0) {
    GTEST_SKIP() << "Bulyan's last Krum rounds score by 1 neighbour (or none), so mutual nearest "
                    "neighbours tie exactly and the lowest index wins";
  }
  testing::expect_near_vectors(b->value, a->value, 1e-4, GetParam().c_str());
}

TEST_P(EveryRule, NonFiniteInputsNeverCrashNeverWinAndAreNamed) {
  for (float poison : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()}) {
    auto rows = testing::gaussian_rows(kN, kD, 3);
    rows[4 * kD + 10] = poison;
    rows[9 * kD + 63] = std::numeric_limits<float>::quiet_NaN();
    auto result = make(spec())->aggregate(InputMatrix(rows.data(), kN, kD));
    ASSERT_TRUE(result.ok()) << spec() << ": " << result.error().to_string();
    EXPECT_EQ(result->report.non_finite, (std::vector<std::size_t>{4, 9})) << spec();
    for (float v : result->value) ASSERT_TRUE(std::isfinite(v)) << spec();
  }
}

// f attackers send huge values or a tight crafted cluster; the output stays within the honest
// radius of the honest mean.
TEST_P(EveryRule, BoundedDeviationUnderAttack) {
  if (is_mean()) GTEST_SKIP() << "the mean is the undefended baseline";
  for (int attack = 0; attack < 3; ++attack) {
    auto rows = testing::gaussian_rows(kN, kD, 4 + attack, 1.0, 1.0);
    for (std::size_t i = 0; i < kF; ++i)
      for (std::size_t c = 0; c < kD; ++c)
        rows[i * kD + c] = attack == 0 ? 1e30f : attack == 1 ? (c % 2 ? 3e38f : -3e38f) : 4.0f;
    std::vector<std::size_t> honest;
    for (std::size_t i = kF; i < kN; ++i) honest.push_back(i);
    const auto center = testing::mean_of_rows(rows, kD, honest);
    double radius = 0;
    for (std::size_t i : honest)
      radius = std::max(radius, std::sqrt(testing::squared_distance(&rows[i * kD], center.data(), kD)));
    auto result = make(spec())->aggregate(InputMatrix(rows.data(), kN, kD));
    ASSERT_TRUE(result.ok()) << spec() << ": " << result.error().to_string();
    EXPECT_LE(std::sqrt(testing::squared_distance(result->value.data(), center.data(), kD)), radius)
        << spec() << " attack " << attack;
  }
}

// Randomised adversarial inputs (a fuzz-style sweep over numbers rather than bytes): random n, d,
// f at the rule's bound, and random NaN, ±Inf, huge, denormal and zero rows or single coordinates.
// Every call returns either a finite output whose report is consistent, or an error — never a
// crash, never a non-finite output.
TEST_P(EveryRule, RandomAdversarialInputsNeverCrash) {
  Rng rng(Rng::stream_id({static_cast<std::uint64_t>(spec().size()), 77}));
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            3.4e38f,
                            -3.4e38f,
                            1e-45f,
                            0.0f,
                            1e19f};
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t n = 11 + rng.uniform_int(6), d = 1 + rng.uniform_int(200);
    auto rows = testing::gaussian_rows(n, d, trial, 1.0 + rng.uniform_int(100));
    const std::size_t corrupt = rng.uniform_int(4);
    std::vector<std::size_t> expected_non_finite;
    for (std::size_t k = 0; k < corrupt; ++k) {
      const std::size_t row = rng.uniform_int(n);
      const float value = specials[rng.uniform_int(std::size(specials))];
      if (rng.bernoulli(0.5)) {
        rows[row * d + rng.uniform_int(d)] = value;
      } else {
        std::fill(rows.begin() + row * d, rows.begin() + (row + 1) * d, value);
      }
    }
    for (std::size_t i = 0; i < n; ++i)
      if (!std::all_of(rows.begin() + i * d, rows.begin() + (i + 1) * d, [](float v) { return std::isfinite(v); }))
        expected_non_finite.push_back(i);
    auto result = make(spec())->aggregate(InputMatrix(rows.data(), n, d));
    if (!result.ok()) {
      EXPECT_TRUE(result.error().code == ErrorCode::kPrecondition) << spec() << ": " << result.error().to_string();
      continue;
    }
    ASSERT_EQ(result->value.size(), d);
    for (float v : result->value) ASSERT_TRUE(std::isfinite(v)) << spec() << " trial " << trial;
    EXPECT_EQ(result->report.non_finite, expected_non_finite) << spec() << " trial " << trial;
    EXPECT_TRUE(std::is_sorted(result->report.selected.begin(), result->report.selected.end()));
    EXPECT_TRUE(std::is_sorted(result->report.excluded.begin(), result->report.excluded.end()));
    if (!is_random() && spec().find('>') == std::string::npos) {
      for (std::size_t i : result->report.non_finite)
        EXPECT_TRUE(std::binary_search(result->report.excluded.begin(), result->report.excluded.end(), i)) << spec();
    }
  }
}

// Sparse inputs (a sparsifying codec's messages, one of them non-finite) aggregate to what the
// rows written out densely give, bit for bit.
TEST_P(EveryRule, SparseInputsGiveTheDenseResult) {
  Rng rng(Rng::stream_id({static_cast<std::uint64_t>(spec().size()), 78}));
  const std::size_t d = 700;
  std::vector<std::vector<std::uint64_t>> indices(kN);
  std::vector<std::vector<float>> values(kN);
  std::vector<float> dense(kN * d, 0.0f);
  for (std::size_t i = 0; i < kN; ++i) {
    for (std::size_t c = 0; c < d; ++c) {
      if (!rng.bernoulli(0.05)) continue;
      indices[i].push_back(c);
      values[i].push_back(i == 6 && indices[i].size() == 3 ? std::numeric_limits<float>::quiet_NaN()
                                                           : static_cast<float>(1.0 + rng.normal()));
      dense[i * d + c] = values[i].back();
    }
  }
  std::vector<SparseRow> rows;
  for (std::size_t i = 0; i < kN; ++i) rows.push_back({indices[i], values[i]});
  auto sparse = aggregate_sparse(*make(spec()), rows, d);
  auto reference = make(spec())->aggregate(InputMatrix(dense.data(), kN, d));
  ASSERT_TRUE(sparse.ok() && reference.ok()) << spec();
  ASSERT_EQ(sparse->value.size(), d);
  EXPECT_EQ(std::memcmp(sparse->value.data(), reference->value.data(), d * sizeof(float)), 0) << spec();
  EXPECT_EQ(sparse->report.non_finite, reference->report.non_finite) << spec();
  EXPECT_EQ(sparse->report.selected, reference->report.selected) << spec();
  EXPECT_EQ(sparse->report.excluded, reference->report.excluded) << spec();
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryRule, ::testing::ValuesIn(every_spec()), [](const auto& info) {
  std::string name;
  for (char c : info.param) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
});

}  // namespace
}  // namespace ballot::robust
