// Monte Carlo error probability of an election code (ALGORITHMS.md §3, "Sanity numbers"), for n
// beyond the exhaustive certificate or for random (non-worst-case) attacks.
//
// One trial: a true sign s (uniform ±1); every partition sign equals s with probability q, i.i.d.;
// a Byzantine set of b nodes drawn uniformly; honest nodes send their local majority, Byzantine
// nodes follow the attack; the server takes the majority. The trial is an error when the final
// vote is not s. Codes: a fixed G, or a Bernoulli(r) code redrawn (with the row-redraw rule) for
// every block of 64 trials — the ensemble average the paper plots.
//
// Tie rules: kPlusOne is Ballot's 1-bit wire rule (local and final ties → +1). kAbstain is the
// reference script's arithmetic (np.sign of float sums): a tied local vote is 0 and abstains, a
// tied final vote is 0 and counts as an error. ALGORITHMS.md's sanity numbers (0.14 / 0.11 / 0.07
// at n = 15, b = 6, q = 0.9, reverse attack) are those of kAbstain; kPlusOne gives lower errors
// for codes with even rows (see docs/election_coding.md).
//
// Method: 64 trials per 64-bit word — partition signs by bit-sliced Bernoulli sampling (q to 20
// bits), local majorities and the final vote by bit-sliced counters (kernels/sign_logic.h).
// Deterministic for (G or r, options): block k uses its own Philox stream. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "coding/allocation_matrix.h"
#include "core/result.h"

namespace ballot::coding {

// What a Byzantine node sends (the paper's attacks, plus the truth-aware worst case).
enum class ElectionAttack : std::uint8_t {
  kReverse,      // −c_i: every partition sign negated (an abstaining tie stays abstaining)
  kDirectional,  // +1 on every coordinate (the reference's "all-one")
  kRandom,       // uniform ±1
  kOpposite,     // −s: knows the true sign (an upper bound for vote-level attacks)
};
const char* election_attack_name(ElectionAttack attack) noexcept;
Result<ElectionAttack> parse_election_attack(const std::string& name);

enum class TieRule : std::uint8_t { kPlusOne, kAbstain };
const char* tie_rule_name(TieRule rule) noexcept;

inline constexpr std::uint64_t kMaxTrials = std::uint64_t{1} << 48;

struct MonteCarloOptions {
  std::size_t b = 0;  // Byzantine nodes per trial
  double q = 0.9;     // P(partition sign = true sign)
  ElectionAttack attack = ElectionAttack::kReverse;
  TieRule ties = TieRule::kPlusOne;
  std::uint64_t trials = std::uint64_t{1} << 16;  // 1 to kMaxTrials
  std::uint64_t seed = 1;
};

struct MonteCarloEstimate {
  std::uint64_t trials = 0;
  std::uint64_t errors = 0;
  double error = 0;            // errors / trials
  double standard_error = 0;   // sqrt(p(1−p)/trials)
  double mean_redundancy = 0;  // r of the code(s) used
};

// Fixed code. Errors (kInvalidArgument): n = 0, b > n, q outside [0, 1], trials = 0.
Result<MonteCarloEstimate> estimate_error(const AllocationMatrix& g, const MonteCarloOptions& options);
// Bernoulli(r) ensemble, one draw per 64 trials; also the errors of AllocationMatrix::bernoulli.
Result<MonteCarloEstimate> estimate_error_bernoulli(std::size_t n, double r, const MonteCarloOptions& options);

}  // namespace ballot::coding
