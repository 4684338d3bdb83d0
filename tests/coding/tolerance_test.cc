#include "coding/tolerance.h"

#include <gtest/gtest.h>

#include <bit>
#include <functional>
#include <limits>

#include "coding/election_encoder.h"
#include "core/rng.h"

namespace ballot::coding {
namespace {

int majority(int plus, int minus) { return plus >= minus ? 1 : -1; }  // ties -> +1

int local_vote(const AllocationMatrix& g, std::size_t i, std::uint64_t pattern) {
  int plus = 0, minus = 0;
  for (std::size_t j = 0; j < g.n(); ++j)
    if (g.get(i, j)) ((pattern >> j) & 1u) ? ++plus : ++minus;
  return majority(plus, minus);
}

// Brute force of (a) straight from the definition: every pattern, every coalition of at most b
// nodes, every choice of the coalition's votes; the decoder must output μ and never tie.
bool brute_force_tolerant_a(const AllocationMatrix& g, std::size_t b) {
  const std::size_t n = g.n();
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << n); ++u) {
    const int plus = std::popcount(u);
    const int mu = majority(plus, static_cast<int>(n) - plus);
    for (std::uint64_t coalition = 0; coalition < (std::uint64_t{1} << n); ++coalition) {
      if (static_cast<std::size_t>(std::popcount(coalition)) > b) continue;
      for (std::uint64_t lies = 0; lies < (std::uint64_t{1} << n); ++lies) {
        if ((lies & ~coalition) != 0) continue;  // lies ⊆ coalition: the nodes that send +1
        int votes_for_mu = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const int v = ((coalition >> i) & 1u) ? (((lies >> i) & 1u) ? 1 : -1) : local_vote(g, i, u);
          votes_for_mu += v == mu;
        }
        if (2 * votes_for_mu <= static_cast<int>(n)) return false;
      }
    }
  }
  return true;
}

// Brute force of (b) without the dominance argument of the implementation: for every coalition B
// and honest pattern with |Σ_honest| > |B|, every honest node whose row meets B is tried with
// every combination of {+1, −1, nothing} from the Byzantine sources (one choice per recipient:
// equivocation allowed); then every vote of the coalition and of the corruptible honest nodes.
bool brute_force_tolerant_b(const AllocationMatrix& g, std::size_t b) {
  const std::size_t n = g.n();
  for (std::uint64_t coalition = 0; coalition < (std::uint64_t{1} << n); ++coalition) {
    const int size = std::popcount(coalition);
    if (static_cast<std::size_t>(size) > b) continue;
    for (std::uint64_t u = 0; u < (std::uint64_t{1} << n); ++u) {
      if ((u & coalition) != 0) continue;  // enumerate honest bits only
      int honest_sum = 0;
      for (std::size_t j = 0; j < n; ++j)
        if (!((coalition >> j) & 1u)) honest_sum += ((u >> j) & 1u) ? 1 : -1;
      if (std::abs(honest_sum) <= size) continue;  // the honest partitions do not decide
      const int tau = honest_sum > 0 ? 1 : -1;
      int fixed_correct = 0;
      int free_votes = size;  // coalition votes plus corruptible honest votes
      for (std::size_t i = 0; i < n; ++i) {
        if ((coalition >> i) & 1u) continue;
        int plus = 0, minus = 0;
        std::vector<std::size_t> byz_inputs;
        for (std::size_t j = 0; j < n; ++j) {
          if (!g.get(i, j)) continue;
          if ((coalition >> j) & 1u) {
            byz_inputs.push_back(j);
          } else {
            ((u >> j) & 1u) ? ++plus : ++minus;
          }
        }
        bool corruptible = false;
        std::size_t combos = 1;
        for (std::size_t k = 0; k < byz_inputs.size(); ++k) combos *= 3;
        for (std::size_t c = 0; c < combos && !corruptible; ++c) {
          int p = plus, m = minus;
          std::size_t code = c;
          for (std::size_t k = 0; k < byz_inputs.size(); ++k, code /= 3) {
            if (code % 3 == 1) ++p;
            if (code % 3 == 2) ++m;
          }
          corruptible = majority(p, m) != tau;
        }
        if (corruptible)
          ++free_votes;
        else
          ++fixed_correct;
      }
      // The adversary sets every free vote; the best it can do is all against tau.
      for (int against = 0; against <= free_votes; ++against) {
        const int correct = fixed_correct + free_votes - against;
        if (2 * correct <= static_cast<int>(n)) return false;
      }
    }
  }
  return true;
}

// One coordinate per pattern: partition j's sign vector has bit c = bit j of patterns[c].
std::vector<BitVector> partition_signs(std::size_t n, const std::vector<std::uint64_t>& patterns) {
  std::vector<BitVector> signs(n, BitVector(patterns.size()));
  for (std::size_t c = 0; c < patterns.size(); ++c)
    for (std::size_t j = 0; j < n; ++j) signs[j].set(c, (patterns[c] >> j) & 1u);
  return signs;
}

// Replays a counter-example through the real encoder and decoder.
void expect_counter_example_breaks(const AllocationMatrix& g, const CounterExample& ce, ThreatModel model) {
  const std::size_t n = g.n();
  const auto signs = partition_signs(n, {ce.pattern});
  std::vector<BitVector> votes(n);
  std::vector<bool> byzantine(n, false);
  for (const auto i : ce.byzantine) byzantine[i] = true;
  std::size_t correct = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (byzantine[i]) {
      votes[i] = BitVector(1, ce.target < 0);  // the coalition votes −target
      continue;
    }
    if (model == ThreatModel::kVotesOnly) {
      encode_replicated(g, i, signs, votes[i]);
    } else {
      // Exchange: every source sends its pattern bit; the coalition's bits are −target already.
      std::vector<ExchangeInput> inputs;
      for (std::size_t j = 0; j < n; ++j) inputs.push_back({static_cast<std::uint32_t>(j), &signs[j]});
      votes[i] = encode_exchange(g, i, 1, inputs).vote;
    }
    correct += votes[i].sign(0) == ce.target;
  }
  EXPECT_EQ(correct, ce.correct_votes);
  BitVector out;
  decode(votes, out);
  if (n % 2 == 1) {
    EXPECT_NE(out.sign(0), ce.target) << ce.to_string(n);
  }
  EXPECT_LE(2 * correct, n) << ce.to_string(n);
  if (model == ThreatModel::kVotesAndSources) {
    // The validity premise holds: the honest partitions decide the majority.
    int honest_sum = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (!byzantine[j]) honest_sum += ((ce.pattern >> j) & 1u) ? 1 : -1;
    EXPECT_GT(honest_sum * ce.target, static_cast<int>(ce.byzantine.size())) << ce.to_string(n);
    for (const auto j : ce.byzantine) EXPECT_EQ(((ce.pattern >> j) & 1u) ? 1 : -1, -ce.target);
  }
}

constexpr ThreatModel kModels[] = {ThreatModel::kVotesOnly, ThreatModel::kVotesAndSources};

TEST(Tolerance, PaperCodeToleratesOneByzantineNodeButNotTwo) {
  const auto g = AllocationMatrix::paper_n5();
  EXPECT_TRUE(certify(g, 1, ThreatModel::kVotesOnly).value().tolerant);
  const auto two = certify(g, 2, ThreatModel::kVotesOnly).value();
  ASSERT_FALSE(two.tolerant);
  ASSERT_TRUE(two.counter_example.has_value());
  EXPECT_EQ(two.counter_example->byzantine.size(), 2u);
  expect_counter_example_breaks(g, *two.counter_example, ThreatModel::kVotesOnly);
  const auto profile = max_tolerated_b(g, ThreatModel::kVotesOnly).value();
  EXPECT_EQ(profile.max_b, 1);
  ASSERT_TRUE(profile.breaking.has_value());
  EXPECT_EQ(profile.breaking->byzantine.size(), 2u);
  expect_counter_example_breaks(g, *profile.breaking, ThreatModel::kVotesOnly);
  // A b whose need + b wraps past 2^64 certifies as b = n does: not tolerant, under either model.
  const std::size_t wrapping = std::numeric_limits<std::size_t>::max() - 1;
  for (const auto model : {ThreatModel::kVotesOnly, ThreatModel::kVotesAndSources}) {
    EXPECT_EQ(certify(g, wrapping, model).value().tolerant, certify(g, 5, model).value().tolerant);
    EXPECT_FALSE(certify(g, wrapping, model).value().tolerant);
  }
}

TEST(Tolerance, IdentityToleratesNoneUnderVotesOnlyButIsValidUnderSources) {
  for (std::size_t n = 3; n <= 15; n += 2) {
    const auto g = AllocationMatrix::identity(n);
    const auto one = certify(g, 1, ThreatModel::kVotesOnly).value();
    ASSERT_FALSE(one.tolerant);
    expect_counter_example_breaks(g, *one.counter_example, ThreatModel::kVotesOnly);
    EXPECT_EQ(max_tolerated_b(g, ThreatModel::kVotesOnly).value().max_b, 0);
    // ALGORITHMS.md §3 (b): plain majority is already valid for every b < n/2.
    const auto b_profile = max_tolerated_b(g, ThreatModel::kVotesAndSources).value();
    EXPECT_EQ(b_profile.max_b, static_cast<int>((n - 1) / 2));
    EXPECT_FALSE(b_profile.breaking.has_value());
  }
}

TEST(Tolerance, GeneralConstructionToleratesItsDesignBForEveryOddNUpTo13) {
  for (std::size_t n = 1; n <= 13; n += 2) {
    for (std::size_t b = 0; 2 * b + 1 <= n; ++b) {
      const auto g = AllocationMatrix::deterministic(n, b).value();
      const auto cert = certify(g, b, ThreatModel::kVotesOnly).value();
      EXPECT_TRUE(cert.tolerant) << "n = " << n << ", b = " << b;
      EXPECT_EQ(cert.patterns_checked, std::uint64_t{1} << n);
      EXPECT_TRUE(certify(g, b, ThreatModel::kVotesAndSources).value().tolerant);
      // It is tight: exactly b under (a), and the structural bound proves exactly b.
      EXPECT_EQ(max_tolerated_b(g, ThreatModel::kVotesOnly).value().max_b, static_cast<int>(b));
      EXPECT_EQ(structural_bound(g).guaranteed_b, static_cast<int>(b));
    }
  }
}

TEST(Tolerance, StructuralBoundNeedsNoEnumerationForLargeN) {
  const auto g = AllocationMatrix::deterministic(101, 17).value();
  const auto bound = structural_bound(g);
  EXPECT_EQ(bound.full_rows, 35u);
  EXPECT_EQ(bound.pairs, 33u);
  EXPECT_EQ(bound.guaranteed_b, 17);
  EXPECT_EQ(structural_bound(AllocationMatrix::identity(9)).guaranteed_b, -1);
  EXPECT_FALSE(certify(g, 17, ThreatModel::kVotesOnly).ok());  // n > kMaxCertifiedNodes
}

TEST(Tolerance, StructuralBoundIsSoundOnRandomCodes) {
  Rng rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 3 + rng.uniform_int(8);
    // Mix full rows, singletons and near-complements so that pairs occur.
    AllocationMatrix g(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto kind = rng.uniform_int(4);
      for (std::size_t j = 0; j < n; ++j) g.set(i, j, kind == 0);
      if (kind == 1) g.set(i, rng.uniform_int(n), true);
      if (kind == 2) {
        for (std::size_t j = 0; j < n; ++j) g.set(i, j, true);
        g.set(i, rng.uniform_int(n), false);
        g.set(i, rng.uniform_int(n), false);
      }
      if (kind == 3)
        for (std::size_t j = 0; j < n; ++j) g.set(i, j, rng.bernoulli(0.5));
    }
    const int bound = structural_bound(g).guaranteed_b;
    const int exact = max_tolerated_b(g, ThreatModel::kVotesOnly).value().max_b;
    EXPECT_LE(bound, exact) << g.to_text();
  }
}

struct RandomCase {
  std::size_t n;
  double density;
};

TEST(Tolerance, MatchesBruteForceOnRandomCodes) {
  Rng rng(11);
  const RandomCase cases[] = {{3, 0.5}, {4, 0.6}, {5, 0.4}, {5, 0.7}, {6, 0.6}, {7, 0.5}, {7, 0.8}};
  for (const auto& c : cases) {
    for (int trial = 0; trial < 12; ++trial) {
      AllocationMatrix g(c.n);
      for (std::size_t i = 0; i < c.n; ++i)
        for (std::size_t j = 0; j < c.n; ++j) g.set(i, j, rng.bernoulli(c.density));
      for (const auto model : kModels) {
        const auto profile = max_tolerated_b(g, model).value();
        for (std::size_t b = 0; 2 * b < c.n; ++b) {
          const bool expected =
              model == ThreatModel::kVotesOnly ? brute_force_tolerant_a(g, b) : brute_force_tolerant_b(g, b);
          const auto cert = certify(g, b, model).value();
          ASSERT_EQ(cert.tolerant, expected) << threat_model_name(model) << " b = " << b << "\n" << g.to_text();
          EXPECT_EQ(static_cast<int>(b) <= profile.max_b, expected);
          if (!cert.tolerant) {
            ASSERT_TRUE(cert.counter_example.has_value());
            EXPECT_LE(cert.counter_example->byzantine.size(), b);
            if (c.n % 2 == 1) expect_counter_example_breaks(g, *cert.counter_example, model);
          }
        }
        if (profile.breaking && c.n % 2 == 1) expect_counter_example_breaks(g, *profile.breaking, model);
      }
    }
  }
}

TEST(Tolerance, VotesOnlyImpliesVotesAndSources) {
  Rng rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 5 + 2 * rng.uniform_int(3);
    AllocationMatrix g(n);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) g.set(i, j, rng.bernoulli(0.6));
    EXPECT_LE(max_tolerated_b(g, ThreatModel::kVotesOnly).value().max_b,
              max_tolerated_b(g, ThreatModel::kVotesAndSources).value().max_b);
  }
}

TEST(Tolerance, PaperCodeUnderSourcesModel) {
  // Coding buys nothing under (b) here: the paper's code is still valid for b = 1 but a
  // majority of Byzantine sources+voters is not covered by validity anyway (b < n/2).
  const auto g = AllocationMatrix::paper_n5();
  const auto profile = max_tolerated_b(g, ThreatModel::kVotesAndSources).value();
  EXPECT_GE(profile.max_b, 1);
  EXPECT_LE(profile.max_b, 2);
  for (std::size_t b = 0; b <= 2; ++b)
    EXPECT_EQ(certify(g, b, ThreatModel::kVotesAndSources).value().tolerant, brute_force_tolerant_b(g, b));
}

TEST(Tolerance, WorksAtTheBoundaryOfTheWordLayout) {
  // n = 6 fills one word exactly; n = 7 needs two words; n = 1, 2 use a partial word.
  for (const std::size_t n : {1u, 2u, 6u, 7u}) {
    const auto g = AllocationMatrix::identity(n);
    const auto cert = certify(g, 0, ThreatModel::kVotesOnly).value();
    EXPECT_EQ(cert.patterns_checked, std::uint64_t{1} << n);
    EXPECT_EQ(cert.tolerant, brute_force_tolerant_a(g, 0)) << n;
  }
}

TEST(Tolerance, RejectsSizesOutsideTheExhaustiveRange) {
  EXPECT_EQ(certify(AllocationMatrix(0), 0, ThreatModel::kVotesOnly).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(max_tolerated_b(AllocationMatrix::identity(31), ThreatModel::kVotesOnly).error().code,
            ErrorCode::kInvalidArgument);
}

TEST(Tolerance, ExhaustiveAtTwentyOneNodes) {
  // 2^21 patterns; the n = 25 timing lives in bench/coding (ELECTION_RESULTS.md).
  const auto g = AllocationMatrix::deterministic(21, 4).value();
  const auto cert = certify(g, 4, ThreatModel::kVotesOnly).value();
  EXPECT_TRUE(cert.tolerant);
  EXPECT_EQ(cert.patterns_checked, std::uint64_t{1} << 21);
  const auto five = certify(g, 5, ThreatModel::kVotesOnly).value();
  ASSERT_FALSE(five.tolerant);
  expect_counter_example_breaks(g, *five.counter_example, ThreatModel::kVotesOnly);
}

}  // namespace
}  // namespace ballot::coding
