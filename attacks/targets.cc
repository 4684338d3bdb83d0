#include "attacks/targets.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <numeric>

#include "attacks/election_adversary.h"
#include "coding/election_encoder.h"
#include "core/bit_vector.h"
#include "core/rng.h"
#include "kernels/majority_vote.h"

namespace ballot::attacks {
namespace {

constexpr std::uint64_t kChoosePurpose = 0x627973656c656374ULL;  // "byselect"
constexpr std::uint64_t kWorstPurpose = 0x7773746574736574ULL;   // "worstset"
constexpr std::size_t kExhaustivePatternNodes = 16;              // 2^16 patterns
constexpr std::size_t kSampledPatterns = 4096;
constexpr std::size_t kLargeSampledPatterns = 1024;  // n > 64: the ranking heuristic

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\n");
  return text.substr(first, last - first + 1);
}

// partition_signs[j] bit p = sign of partition j in pattern p: all 2^n patterns for small n,
// `samples` uniform patterns from a fixed stream otherwise.
std::vector<BitVector> adversarial_patterns(std::size_t n, std::size_t samples) {
  std::vector<BitVector> signs;
  if (n <= kExhaustivePatternNodes) {
    const std::size_t patterns = std::size_t{1} << n;
    signs.assign(n, BitVector(patterns));
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t p = 0; p < patterns; ++p)
        if ((p >> j) & 1u) signs[j].set(p, true);
    return signs;
  }
  signs.assign(n, BitVector(samples));
  for (std::size_t j = 0; j < n; ++j) {
    Rng rng(0, Rng::stream_id({kWorstPurpose, j}));
    for (auto& word : signs[j].words()) word = rng.next_u64();
    signs[j].clear_padding();
  }
  return signs;
}

}  // namespace

Result<std::vector<std::size_t>> choose_byzantine(std::size_t n, std::size_t count, std::uint64_t seed) {
  if (count > n) {
    return make_error(ErrorCode::kInvalidArgument,
                      "cannot choose " + std::to_string(count) + " Byzantine nodes among " + std::to_string(n));
  }
  std::vector<std::size_t> indices(n);
  std::iota(indices.begin(), indices.end(), std::size_t{0});
  Rng rng(seed, Rng::stream_id({kChoosePurpose}));
  rng.shuffle(std::span<std::size_t>(indices));
  indices.resize(count);
  std::sort(indices.begin(), indices.end());
  return indices;
}

Result<std::vector<std::size_t>> parse_indices(std::string_view list, std::size_t n) {
  std::vector<std::size_t> out;
  if (trim(list).empty()) return out;
  std::string_view rest = list;
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      return make_error(ErrorCode::kInvalidArgument,
                        "node list '" + std::string(list) + "': '" + std::string(item) + "' is not a node index");
    if (value >= n)
      return make_error(ErrorCode::kInvalidArgument, "node list '" + std::string(list) + "': node " +
                                                         std::to_string(value) +
                                                         " is out of range (n = " + std::to_string(n) + ")");
    if (std::find(out.begin(), out.end(), value) != out.end())
      return make_error(ErrorCode::kInvalidArgument,
                        "node list '" + std::string(list) + "': node " + std::to_string(value) + " appears twice");
    out.push_back(static_cast<std::size_t>(value));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::size_t> worst_coalition(const coding::AllocationMatrix& g, std::size_t count) {
  const std::size_t n = g.n();
  count = std::min(count, n);
  std::vector<std::size_t> out;
  if (count == 0) return out;
  if (count == n) {
    out.resize(n);
    std::iota(out.begin(), out.end(), std::size_t{0});
    return out;
  }
  if (n <= 64) {
    const std::vector<BitVector> signs = adversarial_patterns(n, kSampledPatterns);
    const OmniscientAttack plan = plan_omniscient_attack(g, signs, count);
    out.assign(plan.byzantine.begin(), plan.byzantine.end());
    return out;
  }
  // n > 64: rank the nodes by how often their honest vote equals μ over the sampled patterns.
  const std::vector<BitVector> signs = adversarial_patterns(n, kLargeSampledPatterns);
  BitVector mu;
  kernels::majority_vote(signs, mu);
  std::vector<std::size_t> agree(n);
  BitVector vote;
  for (std::size_t i = 0; i < n; ++i) {
    coding::encode_replicated(g, i, signs, vote);
    std::size_t same = 0;
    for (std::size_t w = 0; w < vote.num_words(); ++w)
      same += static_cast<std::size_t>(std::popcount(~(vote.words()[w] ^ mu.words()[w]) &
                                                     (w + 1 == vote.num_words() ? vote.last_word_mask() : ~0ULL)));
    agree[i] = same;
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return agree[a] > agree[b]; });
  out.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(count));
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::vector<std::size_t>> select_byzantine(std::string_view selector, std::size_t n, std::size_t count,
                                                  std::uint64_t seed, const coding::AllocationMatrix* g) {
  const std::string_view how = trim(selector);
  if (how == "random") return choose_byzantine(n, count, seed);
  if (how == "worst") {
    if (count > n)
      return make_error(ErrorCode::kInvalidArgument,
                        "cannot choose " + std::to_string(count) + " Byzantine nodes among " + std::to_string(n));
    if (g == nullptr) {  // G = I: every coalition of `count` is as bad as any other
      std::vector<std::size_t> first(count);
      std::iota(first.begin(), first.end(), std::size_t{0});
      return first;
    }
    if (g->n() != n)
      return make_error(ErrorCode::kInvalidArgument, "worst coalition: the allocation matrix has n = " +
                                                         std::to_string(g->n()) + ", expected " + std::to_string(n));
    return worst_coalition(*g, count);
  }
  BALLOT_ASSIGN_OR_RETURN(auto indices, parse_indices(how, n));
  if (count != 0 && indices.size() != count)
    return make_error(ErrorCode::kInvalidArgument, "node list '" + std::string(how) + "' names " +
                                                       std::to_string(indices.size()) + " nodes, expected " +
                                                       std::to_string(count));
  return indices;
}

}  // namespace ballot::attacks
