// Byzantine-tolerance certificates of an allocation matrix (ALGORITHMS.md §3).
//
// Two threat models, one per placement of G (DESIGN.md, round protocol step 2):
//  (a) kVotesOnly — replicated placement, or exchange placement with honest sources whose every
//      input arrives (a missing one abstains and may tie a row; docs/election_coding.md):
//      partition signs are honest and a Byzantine node lies only in its vote. For a sign
//      pattern u of the n partitions, μ(u) = maj_j u_j and A(u) = #nodes whose honest local
//      majority equals μ(u); the worst adversary takes b of those A(u) nodes and flips them. G tolerates b iff
//          for every u:  A(u) ≥ (n + 2b + 1) / 2,
//      i.e. after the attack strictly more than half of the n votes still equal μ(u).
//  (b) kVotesAndSources — exchange placement where a Byzantine node is also the source of its own
//      partition and controls the input it sends to every node of its column (it may send
//      different values to different nodes, or nothing). The target is validity: the vote must
//      equal τ = sign(Σ_{j honest} u_j) whenever the honest partitions decide it whatever the
//      Byzantine ones say (|Σ_honest u| > b). Reduction used (proved in docs/election_coding.md):
//      feeding −τ everywhere is the adversary's dominant input (local majorities are monotone,
//      abstaining is weaker than voting −τ), so the condition is, over full patterns u' whose
//      majority τ is strict, with B among the partitions of sign −τ:
//          #{i ∉ B : maj_{row i}(u') = τ}  >  n / 2     for every such B with |B| ≤ b.
//      Plain majority (G = I) already satisfies (b) for every b < n/2, so coding cannot improve
//      on it under (b); the certificate says how much a code loses or keeps.
// Local and final votes break ties to +1 (Ballot's 1-bit wire rule), an empty row votes +1. A tie
// in the final vote (possible for even n) counts as a failure: the certificates do not rely on the
// tie-break.
//
// Method: exhaustive over the 2^n patterns, 64 patterns per 64-bit word. Pattern p = 64w + k has
// partition j's sign in bit j of p, so partitions 0..5 are lane constants and partitions ≥ 6 are
// constant over a word; node i's local vote is then a table lookup indexed by
// popcount(row_i_high & w), and the counts A (and, for (b), the count restricted to majority-side
// nodes) are bit-sliced counters (kernels/sign_logic.h). Cost O(2^n / 64 · n · log n) word
// operations: n = 25 takes well under a second on one core (bench/coding/ELECTION_RESULTS.md).
// Deterministic (the counter-example is the first failing pattern in index order, the Byzantine
// set its first eligible nodes); thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coding/allocation_matrix.h"
#include "core/result.h"

namespace ballot::coding {

enum class ThreatModel : std::uint8_t {
  kVotesOnly,        // (a): replicated placement, or exchange with honest sources, every input in
  kVotesAndSources,  // (b): exchange placement, Byzantine nodes also source their partitions
};
const char* threat_model_name(ThreatModel model) noexcept;

// Largest n the exhaustive certificates accept (2^30 patterns: about a minute on one core).
inline constexpr std::size_t kMaxCertifiedNodes = 30;

// A concrete attack that defeats the code: replaying it through the encoder and decoder gives a
// final vote different from `target` (the tests do exactly that).
struct CounterExample {
  // Bit j = 1 iff partition j's sign is +1. Under (b) the bits of the Byzantine partitions are the
  // input the adversary feeds to every node of their columns (−target).
  std::uint64_t pattern = 0;
  int target = 1;                        // μ(pattern) under (a); τ under (b). ±1
  std::vector<std::uint32_t> byzantine;  // the coalition, ascending node ids
  std::size_t correct_votes = 0;         // final votes equal to target after the attack

  std::string to_string(std::size_t n) const;  // "u = +-+++ target +1 byzantine {2} correct 2/5"
};

struct Certificate {
  ThreatModel model = ThreatModel::kVotesOnly;
  std::size_t n = 0;
  std::size_t b = 0;
  bool tolerant = false;
  std::optional<CounterExample> counter_example;  // set iff !tolerant
  std::uint64_t patterns_checked = 0;
};

// Is G b-tolerant under `model` (for every coalition of at most b nodes)? Errors: n = 0 or
// n > kMaxCertifiedNodes (kInvalidArgument). Stops at the first failing pattern.
Result<Certificate> certify(const AllocationMatrix& g, std::size_t b, ThreatModel model);

struct ToleranceProfile {
  ThreatModel model = ThreatModel::kVotesOnly;
  std::size_t n = 0;
  // Largest tolerated b; −1 when the code fails even with no Byzantine node.
  int max_b = -1;
  // A coalition of max_b + 1 nodes that breaks the code; absent only under (b) when max_b
  // reaches ⌊(n−1)/2⌋ (beyond that the validity premise |Σ_honest u| > b cannot hold).
  std::optional<CounterExample> breaking;
  // min over the patterns that constrain the model of the number of correct honest votes
  // (A(u) under (a)).
  std::size_t min_correct_votes = 0;
};

// One exhaustive pass; same errors as certify.
Result<ToleranceProfile> max_tolerated_b(const AllocationMatrix& g, ThreatModel model);

// A proof-based lower bound for any n (no enumeration): a full row always votes μ, and a singleton
// row {p} paired with a row R ⊇ [n] \ {p, q}, p ∉ R, always has at least one member voting μ (if
// u_p ≠ μ, removing p and one more partition from the sum keeps its sign). With F full rows and a
// maximum matching of M such pairs (Boost.Graph), A(u) ≥ F + M for every u, so G tolerates
// b = ⌊(2(F + M) − n − 1) / 2⌋ under (a), and therefore under (b) too ((a) implies (b)).
// The general construction has F = 2b + 1 and M = (n − 2b − 1)/2: exactly its design b.
struct StructuralBound {
  std::size_t full_rows = 0;
  std::size_t pairs = 0;
  int guaranteed_b = -1;  // −1: the structure alone guarantees nothing
};
StructuralBound structural_bound(const AllocationMatrix& g);

}  // namespace ballot::coding
