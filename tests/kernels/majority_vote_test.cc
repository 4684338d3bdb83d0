#include "kernels/majority_vote.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/rng.h"
#include "isa_test_util.h"

namespace ballot::kernels {
namespace {

std::vector<BitVector> random_inputs(std::size_t n, std::size_t size, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<BitVector> inputs;
  for (std::size_t i = 0; i < n; ++i) {
    BitVector bits(size);
    for (auto& word : bits.words()) word = rng.next_u64();
    bits.clear_padding();
    inputs.push_back(std::move(bits));
  }
  return inputs;
}

// Brute force: count +1 votes per coordinate, +1 when at least half the weight (ties -> +1).
BitVector reference_vote(const std::vector<BitVector>& inputs, const std::vector<std::uint32_t>& weights,
                         std::size_t size) {
  BitVector out(size);
  std::uint64_t total = 0;
  for (auto w : weights) total += w;
  for (std::size_t c = 0; c < size; ++c) {
    std::uint64_t plus = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) plus += inputs[i].get(c) ? weights[i] : 0;
    out.set(c, 2 * plus >= total);
  }
  return out;
}

class MajorityVote : public PerIsaTest {};

TEST_P(MajorityVote, MatchesBruteForceForOneToSixtyFourInputs) {
  for (std::size_t n = 1; n <= 64; ++n) {
    const std::size_t size = 1000 + 37 * n;  // not a multiple of any vector width
    const auto inputs = random_inputs(n, size, n);
    BitVector out;
    majority_vote(inputs, out);
    EXPECT_EQ(out, reference_vote(inputs, std::vector<std::uint32_t>(n, 1), size)) << "n = " << n;
    EXPECT_TRUE(out.padding_is_clear());
  }
}

// Every count of +1 votes from 0 to n, read at every threshold: n inputs where coordinate c has
// c mod (n + 1) of them +1 (a random subset), beside o all-+1 and n − 1 − o all-−1 inputs, in a
// shuffled order. The vote of 2n − 1 inputs is +1 iff count + o ≥ n, so over o = 0..n − 1 each
// count is pinned exactly, whichever group of the counter's adder tree its votes fall in; with
// 2n − 1 = 2^P − 1 (n = 4, 8, 16, 32, 64) the counter reaches its largest value.
TEST_P(MajorityVote, EveryCountAtEveryThreshold) {
  for (std::size_t n : {1u, 2u, 3u, 4u, 6u, 7u, 8u, 13u, 14u, 15u, 16u, 21u, 22u, 31u, 32u, 63u, 64u}) {
    Rng rng(1000 + n);
    const std::size_t size = (n + 1) * 24 + 5;
    std::vector<BitVector> counted(n, BitVector(size));
    for (std::size_t c = 0; c < size; ++c) {
      std::vector<std::size_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      for (std::size_t k = n; k > 1; --k) std::swap(order[k - 1], order[rng.uniform_int(k)]);
      for (std::size_t k = 0; k < c % (n + 1); ++k) counted[order[k]].set(c, true);
    }
    for (std::size_t o = 0; o < n; ++o) {
      std::vector<BitVector> inputs = counted;
      for (std::size_t k = 0; k + 1 < n; ++k) inputs.emplace_back(size, k < o);
      for (std::size_t k = inputs.size(); k > 1; --k) std::swap(inputs[k - 1], inputs[rng.uniform_int(k)]);
      BitVector out;
      majority_vote(inputs, out);
      ASSERT_EQ(out, reference_vote(inputs, std::vector<std::uint32_t>(2 * n - 1, 1), size))
          << "n = " << n << ", o = " << o;
      for (std::size_t c = 0; c < size; ++c) ASSERT_EQ(out.get(c), c % (n + 1) + o >= n) << n << " " << o << " " << c;
    }
  }
}

TEST_P(MajorityVote, ExactTiesGoToPlusOne) {
  BitVector plus(130, true), minus(130, false);
  std::vector<BitVector> inputs{plus, minus, minus, plus};
  BitVector out;
  majority_vote(inputs, out);
  EXPECT_EQ(out.count_ones(), 130u);
  inputs.push_back(minus);
  majority_vote(inputs, out);
  EXPECT_EQ(out.count_ones(), 0u);
}

TEST_P(MajorityVote, BoundarySizes) {
  for (std::size_t size : {0u, 1u, 63u, 64u, 65u, 511u, 512u, 513u}) {
    const auto inputs = random_inputs(7, size, size);
    BitVector out;
    majority_vote(inputs, out);
    EXPECT_EQ(out, reference_vote(inputs, std::vector<std::uint32_t>(7, 1), size)) << size;
  }
}

TEST_P(MajorityVote, EmptyVoteIsAllPlusOne) {
  BitVector out(100);
  majority_vote(std::span<const BitVector>{}, out);
  EXPECT_EQ(out.count_ones(), 100u);
  EXPECT_TRUE(out.padding_is_clear());
}

TEST_P(MajorityVote, ManyInputsNeedWideCounters) {
  const auto inputs = random_inputs(300, 777, 5);
  BitVector out;
  majority_vote(inputs, out);
  EXPECT_EQ(out, reference_vote(inputs, std::vector<std::uint32_t>(300, 1), 777));
}

TEST_P(MajorityVote, WeightedVoteMatchesBruteForce) {
  Rng rng(11);
  for (std::size_t n : {1u, 2u, 5u, 16u, 33u}) {
    const auto inputs = random_inputs(n, 999, 50 + n);
    std::vector<std::uint32_t> weights(n);
    for (auto& w : weights) w = static_cast<std::uint32_t>(rng.uniform_int(20));
    std::vector<const BitVector*> pointers;
    for (const auto& in : inputs) pointers.push_back(&in);
    BitVector out;
    weighted_majority_vote(pointers, weights, out);
    if (std::accumulate(weights.begin(), weights.end(), 0u) == 0) {
      EXPECT_EQ(out.count_ones(), out.size());
    } else {
      EXPECT_EQ(out, reference_vote(inputs, weights, 999)) << "n = " << n;
    }
  }
}

TEST_P(MajorityVote, LargeWeightsUseHighPlanes) {
  const auto inputs = random_inputs(3, 200, 8);
  const std::vector<std::uint32_t> weights{1u << 30, (1u << 30) - 1, 3};
  std::vector<const BitVector*> pointers{&inputs[0], &inputs[1], &inputs[2]};
  BitVector out;
  weighted_majority_vote(pointers, weights, out);
  EXPECT_EQ(out, reference_vote(inputs, weights, 200));
}

TEST_P(MajorityVote, UnitWeightsEqualPlainVote) {
  const auto inputs = random_inputs(9, 5000, 3);
  std::vector<const BitVector*> pointers;
  for (const auto& in : inputs) pointers.push_back(&in);
  BitVector plain, weighted;
  majority_vote(pointers, plain);
  weighted_majority_vote(pointers, std::vector<std::uint32_t>(9, 1), weighted);
  EXPECT_EQ(plain, weighted);
}

BALLOT_INSTANTIATE_PER_ISA(MajorityVote);

}  // namespace
}  // namespace ballot::kernels
