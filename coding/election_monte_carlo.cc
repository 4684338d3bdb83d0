#include "coding/election_monte_carlo.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <optional>
#include <vector>

#include "core/rng.h"
#include "kernels/sign_logic.h"

namespace ballot::coding {
namespace {

using kernels::bitsliced_add;
using kernels::bitsliced_greater_equal;
using kernels::planes_for;

constexpr std::uint64_t kPurposeMonteCarlo = 0x4D0C4E;
constexpr int kProbabilityBits = 20;  // q to within 1e-6: far below Monte Carlo noise
constexpr int kMaxPlanes = 16;        // counters up to 2 * AllocationMatrix::kMaxNodes < 2^16

// 64 independent bits, each 1 with probability ⌊q·2^32⌋ / 2^32: consume the binary digits of q
// from the least significant, x ← digit ? (x | r) : (x & r) with a fresh uniform word r, so that
// P(x = 1) is the value of the digits seen so far.
std::uint64_t bernoulli_word(Rng& rng, std::uint32_t q_fixed, bool q_is_one) {
  if (q_is_one) return ~std::uint64_t{0};
  std::uint64_t x = 0;
  for (int k = 0; k < kProbabilityBits; ++k) {
    const std::uint64_t r = rng.next_u64();
    x = ((q_fixed >> k) & 1u) ? (x | r) : (x & r);
  }
  return x;
}

Status check(std::size_t n, const MonteCarloOptions& o) {
  if (n == 0 || n > AllocationMatrix::kMaxNodes)
    return make_error(ErrorCode::kInvalidArgument, "monte carlo: n = " + std::to_string(n) + " out of range");
  if (o.b > n)
    return make_error(ErrorCode::kInvalidArgument,
                      "monte carlo: b = " + std::to_string(o.b) + " exceeds n = " + std::to_string(n));
  if (!(o.q >= 0.0 && o.q <= 1.0)) return make_error(ErrorCode::kInvalidArgument, "monte carlo: q must be in [0, 1]");
  if (o.trials == 0) return make_error(ErrorCode::kInvalidArgument, "monte carlo: trials must be > 0");
  if (o.trials > kMaxTrials)
    return make_error(ErrorCode::kInvalidArgument,
                      "monte carlo: trials = " + std::to_string(o.trials) + " exceeds 2^48 (days of work)");
  return {};
}

// `code(block_rng)` returns the matrix of a block (the fixed one, or a fresh Bernoulli draw).
template <typename CodeForBlock>
Result<MonteCarloEstimate> run(std::size_t n, const MonteCarloOptions& o, CodeForBlock code) {
  BALLOT_TRY(check(n, o));
  const bool q_is_one = o.q >= 1.0;
  const auto q_fixed = static_cast<std::uint32_t>(std::ldexp(o.q, kProbabilityBits));
  const int vote_planes = planes_for(2 * n);
  const std::uint64_t blocks = (o.trials + 63) / 64;
  std::vector<std::uint64_t> sign(n), plus(n), minus(n);
  std::vector<std::uint32_t> order(n);
  MonteCarloEstimate est;
  double redundancy_sum = 0;
  for (std::uint64_t block = 0; block < blocks; ++block) {
    Rng rng(o.seed, Rng::stream_id({kPurposeMonteCarlo, n, block}));
    BALLOT_ASSIGN_OR_RETURN(const AllocationMatrix* g, code(rng));
    redundancy_sum += g->redundancy();
    const std::uint64_t truth = rng.next_u64();
    // u_j = truth where the partition is right (probability q), −truth elsewhere.
    for (std::size_t j = 0; j < n; ++j) sign[j] = ~(truth ^ bernoulli_word(rng, q_fixed, q_is_one));
    // Local majorities (encoder).
    for (std::size_t i = 0; i < n; ++i) {
      const auto row = g->row(i);
      const int planes = planes_for(row.size());
      std::uint64_t count[kMaxPlanes] = {};
      for (const std::uint32_t j : row) bitsliced_add(count, planes, 0, sign[j]);
      const std::size_t k = row.size();
      if (o.ties == TieRule::kPlusOne) {
        plus[i] = bitsliced_greater_equal(count, planes, (k + 1) / 2);
        minus[i] = ~plus[i];
      } else {  // np.sign: +1 above half, −1 below, 0 (abstain) at an exact tie or empty row
        plus[i] = bitsliced_greater_equal(count, planes, k / 2 + 1);
        minus[i] = ~bitsliced_greater_equal(count, planes, (k + 1) / 2);
      }
    }
    // The Byzantine set: a uniform b-subset (partial Fisher–Yates).
    std::iota(order.begin(), order.end(), 0u);
    for (std::size_t k = 0; k < o.b; ++k) {
      const std::size_t pick = k + static_cast<std::size_t>(rng.uniform_int(n - k));
      std::swap(order[k], order[pick]);
      const std::uint32_t i = order[k];
      switch (o.attack) {
        case ElectionAttack::kReverse:
          std::swap(plus[i], minus[i]);
          break;
        case ElectionAttack::kDirectional:
          plus[i] = ~std::uint64_t{0};
          minus[i] = 0;
          break;
        case ElectionAttack::kRandom:
          plus[i] = rng.next_u64();
          minus[i] = ~plus[i];
          break;
        case ElectionAttack::kOpposite:
          plus[i] = ~truth;
          minus[i] = truth;
          break;
      }
    }
    // Decoder: X = #plus + #(not minus) = n + (P − M); P > M ⇔ X ≥ n + 1, P < M ⇔ X < n.
    std::uint64_t x[kMaxPlanes] = {};
    for (std::size_t i = 0; i < n; ++i) {
      bitsliced_add(x, vote_planes, 0, plus[i]);
      bitsliced_add(x, vote_planes, 0, ~minus[i]);
    }
    const std::uint64_t at_least_n = bitsliced_greater_equal(x, vote_planes, n);
    const std::uint64_t v_plus =
        o.ties == TieRule::kPlusOne ? at_least_n : bitsliced_greater_equal(x, vote_planes, n + 1);
    const std::uint64_t v_minus = ~at_least_n;
    std::uint64_t error = (truth & ~v_plus) | (~truth & ~v_minus);
    const std::uint64_t in_block = std::min<std::uint64_t>(64, o.trials - 64 * block);
    if (in_block < 64) error &= (std::uint64_t{1} << in_block) - 1;
    est.errors += static_cast<std::uint64_t>(std::popcount(error));
  }
  est.trials = o.trials;
  est.error = static_cast<double>(est.errors) / static_cast<double>(est.trials);
  est.standard_error = std::sqrt(est.error * (1 - est.error) / static_cast<double>(est.trials));
  est.mean_redundancy = redundancy_sum / static_cast<double>(blocks);
  return est;
}

}  // namespace

const char* election_attack_name(ElectionAttack attack) noexcept {
  switch (attack) {
    case ElectionAttack::kReverse:
      return "reverse";
    case ElectionAttack::kDirectional:
      return "directional";
    case ElectionAttack::kRandom:
      return "random";
    case ElectionAttack::kOpposite:
      return "opposite";
  }
  return "?";
}

Result<ElectionAttack> parse_election_attack(const std::string& name) {
  for (const auto a :
       {ElectionAttack::kReverse, ElectionAttack::kDirectional, ElectionAttack::kRandom, ElectionAttack::kOpposite})
    if (name == election_attack_name(a)) return a;
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown attack '" + name + "' (known: reverse, directional, random, opposite)");
}

const char* tie_rule_name(TieRule rule) noexcept { return rule == TieRule::kPlusOne ? "ties+1" : "ties-abstain"; }

Result<MonteCarloEstimate> estimate_error(const AllocationMatrix& g, const MonteCarloOptions& options) {
  return run(g.n(), options, [&g](Rng&) -> Result<const AllocationMatrix*> { return &g; });
}

Result<MonteCarloEstimate> estimate_error_bernoulli(std::size_t n, double r, const MonteCarloOptions& options) {
  std::optional<AllocationMatrix> current;
  return run(n, options, [&](Rng& rng) -> Result<const AllocationMatrix*> {
    BALLOT_ASSIGN_OR_RETURN(auto g, AllocationMatrix::bernoulli(n, r, rng.next_u64()));
    current = std::move(g);
    return &*current;
  });
}

}  // namespace ballot::coding
