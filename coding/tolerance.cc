#include "coding/tolerance.h"

#include <algorithm>
#include <bit>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/max_cardinality_matching.hpp>

#include "core/enforce.h"
#include "kernels/sign_logic.h"

namespace ballot::coding {
namespace {

using kernels::bitsliced_add;
using kernels::bitsliced_greater_equal;

// Lane constants: bit k of kLane[j] is bit j of k, i.e. the sign of partition j < 6 in pattern
// 64w + k.
constexpr std::uint64_t kLane[6] = {0xAAAAAAAAAAAAAAAAull, 0xCCCCCCCCCCCCCCCCull, 0xF0F0F0F0F0F0F0F0ull,
                                    0xFF00FF00FF00FF00ull, 0xFFFF0000FFFF0000ull, 0xFFFFFFFF00000000ull};
constexpr int kPlanes = 5;  // counters up to 31 >= kMaxCertifiedNodes

// Everything a pass over the patterns needs, precomputed once per matrix.
struct PatternSpace {
  std::size_t n = 0;
  int low_bits = 0;                                    // min(n, 6): partitions that vary inside a word
  std::uint64_t num_words = 0;                         // 2^(n-6), or 1 when n <= 6
  std::uint64_t valid = 0;                             // valid lanes (all 64 unless n < 6)
  std::vector<std::uint64_t> rows;                     // row masks
  std::vector<std::uint64_t> high;                     // row bits >= 6, shifted down by 6
  std::vector<std::vector<std::uint64_t>> vote_table;  // [node][h]: lanes voting +1
  std::vector<std::uint64_t> mu_table;                 // [h]: lanes where μ = +1
  std::vector<std::uint64_t> strict_table;             // [h]: lanes where the partition majority is strict

  explicit PatternSpace(const AllocationMatrix& g) : n(g.n()) {
    low_bits = static_cast<int>(std::min<std::size_t>(n, 6));
    num_words = n <= 6 ? 1 : (std::uint64_t{1} << (n - 6));
    const std::size_t lanes = std::size_t{1} << low_bits;
    valid = lanes == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << lanes) - 1);
    const std::uint64_t low_all = (std::uint64_t{1} << low_bits) - 1;
    const auto lanes_where = [&](std::uint64_t low_mask, auto predicate) {
      std::uint64_t word = 0;
      for (std::size_t k = 0; k < lanes; ++k)
        if (predicate(static_cast<std::size_t>(std::popcount(low_mask & k)))) word |= std::uint64_t{1} << k;
      return word;
    };
    const std::size_t high_count = n - static_cast<std::size_t>(low_bits);
    for (std::size_t h = 0; h <= high_count; ++h) {
      // Ties of the partition majority go to +1: μ = +1 iff #plus >= ceil(n/2).
      mu_table.push_back(lanes_where(low_all, [&](std::size_t c) { return 2 * (c + h) >= n; }));
      strict_table.push_back(lanes_where(low_all, [&](std::size_t c) { return 2 * (c + h) != n; }));
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t row = g.row_mask(i);
      rows.push_back(row);
      high.push_back(row >> 6);
      const std::size_t size = static_cast<std::size_t>(std::popcount(row));
      const std::size_t row_high = static_cast<std::size_t>(std::popcount(row >> 6));
      std::vector<std::uint64_t> table;
      for (std::size_t h = 0; h <= row_high; ++h)  // local tie -> +1, empty row -> +1
        table.push_back(lanes_where(row & low_all, [&](std::size_t c) { return 2 * (c + h) >= size; }));
      vote_table.push_back(std::move(table));
    }
  }

  // Sign word of partition j over the lanes of word w.
  std::uint64_t partition_word(std::size_t j, std::uint64_t w) const {
    if (j < 6) return kLane[j];
    return ((w >> (j - 6)) & 1u) ? ~std::uint64_t{0} : 0;
  }
};

// Scalar evaluation of one pattern, for counter-examples.
struct PatternVotes {
  int mu = 1;
  std::vector<int> vote;  // honest local majority of each node
};
PatternVotes evaluate(const PatternSpace& s, std::uint64_t pattern) {
  PatternVotes out;
  const std::size_t plus = static_cast<std::size_t>(std::popcount(pattern));
  out.mu = 2 * plus >= s.n ? 1 : -1;
  for (std::size_t i = 0; i < s.n; ++i) {
    const std::size_t size = static_cast<std::size_t>(std::popcount(s.rows[i]));
    const std::size_t row_plus = static_cast<std::size_t>(std::popcount(s.rows[i] & pattern));
    out.vote.push_back(2 * row_plus >= size ? 1 : -1);
  }
  return out;
}

std::size_t lane_count(const std::uint64_t* planes, int lane) {
  std::size_t value = 0;
  for (int k = 0; k < kPlanes; ++k) value |= ((planes[k] >> lane) & 1u) << k;
  return value;
}

// Builds the counter-example for `pattern`: the Byzantine set is the first `size` nodes that
// vote the target honestly (under (b): among those whose own partition has sign −target).
CounterExample make_counter_example(const PatternSpace& s, std::uint64_t pattern, ThreatModel model, std::size_t size) {
  const PatternVotes votes = evaluate(s, pattern);
  CounterExample ce;
  ce.pattern = pattern;
  ce.target = votes.mu;
  std::size_t correct = 0;
  for (std::size_t i = 0; i < s.n; ++i) {
    if (votes.vote[i] != votes.mu) continue;
    ++correct;
    const bool eligible = model == ThreatModel::kVotesOnly || (((pattern >> i) & 1u) ? 1 : -1) != votes.mu;
    if (eligible && ce.byzantine.size() < size) ce.byzantine.push_back(static_cast<std::uint32_t>(i));
  }
  ce.correct_votes = correct - ce.byzantine.size();
  return ce;
}

// Per word: the counters A (nodes voting μ) and, for (b), A_maj (nodes voting μ whose own
// partition also has sign μ; A − A_maj = K is the number a source-controlling coalition can remove).
struct WordCounts {
  std::uint64_t a[kPlanes];
  std::uint64_t a_maj[kPlanes];
  std::uint64_t strict;
};

template <bool kWithSources>
void count_word(const PatternSpace& s, std::uint64_t w, WordCounts& out) {
  std::fill(std::begin(out.a), std::end(out.a), 0);
  std::fill(std::begin(out.a_maj), std::end(out.a_maj), 0);
  const std::size_t h = static_cast<std::size_t>(std::popcount(w));
  const std::uint64_t mu = s.mu_table[h];
  out.strict = s.strict_table[h];
  for (std::size_t i = 0; i < s.n; ++i) {
    const std::uint64_t vote = s.vote_table[i][static_cast<std::size_t>(std::popcount(s.high[i] & w))];
    const std::uint64_t eq = ~(vote ^ mu);
    bitsliced_add(out.a, kPlanes, 0, eq);
    if constexpr (kWithSources) {
      const std::uint64_t majority_side = ~(s.partition_word(i, w) ^ mu);
      bitsliced_add(out.a_maj, kPlanes, 0, eq & majority_side);
    }
  }
}

Status check_size(const AllocationMatrix& g) {
  if (g.n() == 0 || g.n() > kMaxCertifiedNodes)
    return make_error(ErrorCode::kInvalidArgument, "tolerance certificate: n = " + std::to_string(g.n()) +
                                                       " is not in [1, " + std::to_string(kMaxCertifiedNodes) +
                                                       "] (use the Monte Carlo estimate or structural_bound beyond)");
  return {};
}

// Strict majority of the n final votes.
std::size_t votes_needed(std::size_t n) { return n / 2 + 1; }

}  // namespace

const char* threat_model_name(ThreatModel model) noexcept {
  switch (model) {
    case ThreatModel::kVotesOnly:
      return "votes-only (a)";
    case ThreatModel::kVotesAndSources:
      return "votes+sources (b)";
  }
  return "?";
}

std::string CounterExample::to_string(std::size_t n) const {
  std::string text = "u = ";
  for (std::size_t j = 0; j < n; ++j) text.push_back(((pattern >> j) & 1u) ? '+' : '-');
  text += target > 0 ? ", target +1, byzantine {" : ", target -1, byzantine {";
  for (std::size_t k = 0; k < byzantine.size(); ++k) {
    if (k > 0) text += ",";
    text += std::to_string(byzantine[k]);
  }
  text += "}, correct votes " + std::to_string(correct_votes) + "/" + std::to_string(n);
  return text;
}

Result<Certificate> certify(const AllocationMatrix& g, std::size_t b, ThreatModel model) {
  BALLOT_TRY(check_size(g));
  const PatternSpace s(g);
  const std::size_t need = votes_needed(s.n);
  Certificate cert;
  cert.model = model;
  cert.n = s.n;
  cert.b = b;
  cert.tolerant = true;
  // At most n nodes can lie: a larger b certifies as b = n does (and need + b cannot wrap).
  const std::size_t at_most = need + std::min(b, s.n);
  WordCounts counts;
  for (std::uint64_t w = 0; w < s.num_words; ++w) {
    std::uint64_t fail;
    if (model == ThreatModel::kVotesOnly) {
      count_word<false>(s, w, counts);
      // (a): fail iff A − b < need.
      fail = ~bitsliced_greater_equal(counts.a, kPlanes, at_most);
    } else {
      count_word<true>(s, w, counts);
      // (b): fail iff A − min(b, K) < need, i.e. A < need + b and A_maj = A − K < need, on the
      // patterns whose majority is strict (the validity premise).
      fail = ~bitsliced_greater_equal(counts.a, kPlanes, at_most) &
             ~bitsliced_greater_equal(counts.a_maj, kPlanes, need) & counts.strict;
    }
    fail &= s.valid;
    cert.patterns_checked += static_cast<std::uint64_t>(std::popcount(s.valid));
    if (fail != 0) {
      const int lane = std::countr_zero(fail);
      const std::uint64_t pattern = (w << 6) | static_cast<std::uint64_t>(lane);
      cert.tolerant = false;
      cert.counter_example = make_counter_example(s, pattern, model, b);
      return cert;
    }
  }
  return cert;
}

Result<ToleranceProfile> max_tolerated_b(const AllocationMatrix& g, ThreatModel model) {
  BALLOT_TRY(check_size(g));
  const PatternSpace s(g);
  const std::size_t need = votes_needed(s.n);
  const int cap = static_cast<int>((s.n - 1) / 2);
  std::size_t best = s.n + 1;  // min A over the constraining patterns
  std::uint64_t best_pattern = 0;
  bool any = false;
  WordCounts counts;
  for (std::uint64_t w = 0; w < s.num_words; ++w) {
    std::uint64_t candidates;
    if (model == ThreatModel::kVotesOnly) {
      count_word<false>(s, w, counts);
      candidates = s.valid;
    } else {
      count_word<true>(s, w, counts);
      // Patterns with A_maj >= need never fail under (b); the others fail for b > A − need.
      candidates = ~bitsliced_greater_equal(counts.a_maj, kPlanes, need) & counts.strict & s.valid;
    }
    // Lanes below the current minimum are rare after the first words: extract them one by one.
    std::uint64_t below = candidates & ~bitsliced_greater_equal(counts.a, kPlanes, best);
    while (below != 0) {
      const int lane = std::countr_zero(below);
      below &= below - 1;
      const std::size_t value = lane_count(counts.a, lane);
      if (value < best) {
        best = value;
        best_pattern = (w << 6) | static_cast<std::uint64_t>(lane);
        any = true;
      }
    }
  }
  ToleranceProfile profile;
  profile.model = model;
  profile.n = s.n;
  if (!any) {  // only under (b): no pattern constrains b
    profile.max_b = cap;
    profile.min_correct_votes = s.n;
    return profile;
  }
  profile.min_correct_votes = best;
  const int margin = static_cast<int>(best) - static_cast<int>(need);
  profile.max_b = std::min(std::max(margin, -1), cap);
  const std::size_t breaking_size = static_cast<std::size_t>(std::max(margin + 1, 0));
  profile.breaking = make_counter_example(s, best_pattern, model, breaking_size);
  return profile;
}

StructuralBound structural_bound(const AllocationMatrix& g) {
  const std::size_t n = g.n();
  StructuralBound bound;
  std::vector<std::size_t> singles, complements;
  std::vector<std::size_t> size(n);
  for (std::size_t i = 0; i < n; ++i) {
    size[i] = g.row_size(i);
    if (size[i] == n)
      ++bound.full_rows;
    else if (size[i] == 1)
      singles.push_back(i);
    if (size[i] + 2 >= n && size[i] < n) complements.push_back(i);
  }
  // Bipartite graph singleton rows {p} -- rows R with p ∉ R and |R| >= n − 2; a maximum
  // matching counts disjoint pairs, each of which has a member voting μ on every pattern. A row
  // that is both a singleton and a complement (n <= 3) is used at most once by the matching.
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
  Graph graph(n);
  for (const std::size_t s : singles) {
    const std::size_t p = g.row(s).front();
    for (const std::size_t c : complements)
      if (c != s && !g.get(c, p)) boost::add_edge(s, c, graph);
  }
  std::vector<boost::graph_traits<Graph>::vertex_descriptor> mate(n);
  boost::edmonds_maximum_cardinality_matching(graph, mate.data());
  bound.pairs = boost::matching_size(graph, mate.data());
  const long twice = 2 * static_cast<long>(bound.full_rows + bound.pairs) - static_cast<long>(n) - 1;
  bound.guaranteed_b = twice < 0 ? -1 : static_cast<int>(twice / 2);
  return bound;
}

}  // namespace ballot::coding
