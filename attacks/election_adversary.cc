#include "attacks/election_adversary.h"

#include <algorithm>
#include <bit>
#include <map>

#include "coding/election_encoder.h"
#include "core/enforce.h"
#include "kernels/majority_vote.h"

namespace ballot::attacks {
namespace {

using coding::AllocationMatrix;
using coding::CounterExample;
using coding::ThreatModel;

// Coordinates that share the set of nodes voting μ and the number of μ votes the decoder needs.
struct Group {
  std::uint64_t correct;  // nodes whose honest vote equals μ here
  int need;               // μ = +1: ⌈n/2⌉ (ties → +1); μ = −1: ⌊n/2⌋ + 1
  std::size_t count;
};

std::size_t errors_of(const std::vector<Group>& groups, std::uint64_t coalition) {
  std::size_t errors = 0;
  for (const Group& grp : groups)
    if (std::popcount(grp.correct & ~coalition) < grp.need) errors += grp.count;
  return errors;
}

// Smooth progress score for the greedy phase: coordinates not yet flipped count by how far the
// coalition has eaten into their margin.
double progress_of(const std::vector<Group>& groups, std::uint64_t coalition) {
  double score = 0;
  for (const Group& grp : groups) {
    const int remaining = std::popcount(grp.correct & ~coalition);
    const int margin = std::popcount(grp.correct) - grp.need + 1;  // removals needed to flip
    if (remaining < grp.need)
      score += static_cast<double>(grp.count);
    else if (margin > 0)
      score += static_cast<double>(grp.count) * std::popcount(grp.correct & coalition) / (margin + 1.0);
  }
  return score;
}

std::uint64_t binomial(std::size_t n, std::size_t k) {
  if (k > n) return 0;
  std::uint64_t result = 1;
  for (std::size_t i = 1; i <= k; ++i) {
    result = result * (n - k + i) / i;
    if (result > (std::uint64_t{1} << 62)) return result;
  }
  return result;
}

}  // namespace

OmniscientAttack plan_omniscient_attack(const AllocationMatrix& g, std::span<const BitVector> partition_signs,
                                        std::size_t b, const OmniscientOptions& options) {
  const std::size_t n = g.n();
  BALLOT_ENFORCE_LE(n, std::size_t{64});
  BALLOT_ENFORCE_LE(b, n);
  BALLOT_ENFORCE_EQ(partition_signs.size(), n);
  OmniscientAttack out;
  std::vector<BitVector> votes;
  coding::elect_replicated(g, partition_signs, votes, out.honest_vote);
  kernels::majority_vote(partition_signs, out.target);
  const std::size_t d = out.target.size();

  std::map<std::pair<std::uint64_t, int>, std::size_t> by_key;
  for (std::size_t c = 0; c < d; ++c) {
    const bool mu = out.target.get(c);
    std::uint64_t correct = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (votes[i].get(c) == mu) correct |= std::uint64_t{1} << i;
    const int need = mu ? static_cast<int>((n + 1) / 2) : static_cast<int>(n / 2 + 1);
    ++by_key[{correct, need}];
  }
  std::vector<Group> groups;
  for (const auto& [key, count] : by_key) groups.push_back({key.first, key.second, count});

  std::uint64_t best = 0;
  if (b > 0 && binomial(n, b) <= options.max_exhaustive_sets) {
    // Every b-subset in lexicographic order of its mask (Gosper's hack).
    std::size_t best_errors = 0;
    bool first = true;
    for (std::uint64_t set = b == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << b) - 1;;) {
      const std::size_t e = errors_of(groups, set);
      if (first || e > best_errors) {
        best = set;
        best_errors = e;
        first = false;
      }
      const std::uint64_t low = set & (~set + 1);
      const std::uint64_t ripple = set + low;
      if (ripple == 0 || (n < 64 && (ripple >> n) != 0)) break;
      set = ripple | (((set ^ ripple) >> 2) / low);
    }
    out.exhaustive = true;
  } else if (b > 0) {
    const auto better = [&](std::uint64_t a, std::uint64_t current) {
      const std::size_t ea = errors_of(groups, a), ec = errors_of(groups, current);
      return ea != ec ? ea > ec : progress_of(groups, a) > progress_of(groups, current) + 1e-12;
    };
    for (std::size_t k = 0; k < b; ++k) {  // greedy growth
      std::uint64_t pick = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t bit = std::uint64_t{1} << i;
        if (best & bit) continue;
        if (pick == 0 || better(best | bit, best | pick)) pick = bit;
      }
      best |= pick;
    }
    for (int round = 0; round < options.max_local_search_rounds; ++round) {  // 1-swap search
      bool improved = false;
      for (std::size_t out_i = 0; out_i < n && !improved; ++out_i) {
        if (!((best >> out_i) & 1u)) continue;
        for (std::size_t in_i = 0; in_i < n && !improved; ++in_i) {
          if ((best >> in_i) & 1u) continue;
          const std::uint64_t candidate = (best & ~(std::uint64_t{1} << out_i)) | (std::uint64_t{1} << in_i);
          if (errors_of(groups, candidate) > errors_of(groups, best)) {
            best = candidate;
            improved = true;
          }
        }
      }
      if (!improved) break;
    }
  } else {
    out.exhaustive = true;
  }

  // Messages: −μ from every coalition member; then the real decoder over the attacked votes.
  BitVector against = out.target;
  against.flip();
  for (std::size_t i = 0; i < n; ++i) {
    if (!((best >> i) & 1u)) continue;
    out.byzantine.push_back(static_cast<std::uint32_t>(i));
    out.messages.push_back(against);
    votes[i] = against;
  }
  coding::decode(votes, out.attacked_vote);
  for (std::size_t c = 0; c < d; ++c) {
    out.errors += out.attacked_vote.get(c) != out.target.get(c);
    out.flipped += out.attacked_vote.get(c) != out.honest_vote.get(c);
  }
  return out;
}

Result<CounterExample> smallest_breaking_coalition(const AllocationMatrix& g, ThreatModel model) {
  BALLOT_ASSIGN_OR_RETURN(const auto profile, coding::max_tolerated_b(g, model));
  if (!profile.breaking)
    return make_error(ErrorCode::kNotFound, std::string("no coalition smaller than n/2 breaks this code under ") +
                                                coding::threat_model_name(model));
  return *profile.breaking;
}

}  // namespace ballot::attacks
