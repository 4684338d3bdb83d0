#include "coding/code_search.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "core/enforce.h"

namespace ballot::coding {
namespace {

struct Cell {
  std::uint32_t start;
  std::uint32_t length;
};

class Search {
 public:
  Search(std::size_t n, std::size_t b, const CodeSearchOptions& options)
      : n_(n),
        patterns_(std::size_t{1} << n),
        words_((patterns_ + 63) / 64),
        threshold_(static_cast<int>(n / 2 + 1 + b)),
        options_(options) {
    // C_S for every subset S: bit u set iff the majority of S (ties and empty → +1) equals μ(u).
    correct_.assign((std::size_t{1} << n) * words_, 0);
    for (std::uint64_t s = 0; s < (std::uint64_t{1} << n); ++s) {
      const int size = std::popcount(s);
      for (std::uint64_t u = 0; u < patterns_; ++u) {
        const bool mu = 2 * std::popcount(u) >= static_cast<int>(n);
        const bool vote = 2 * std::popcount(u & s) >= size;
        if (mu == vote) correct_[s * words_ + u / 64] |= std::uint64_t{1} << (u % 64);
      }
    }
    count_.assign(patterns_, 0);
  }

  void set_incumbent(const AllocationMatrix& g) {
    best_cost_ = g.ones();
    best_rows_.clear();
    for (std::size_t i = 0; i < n_; ++i) best_rows_.push_back(g.row_mask(i));
  }

  void run() {
    rows_.clear();
    std::vector<Cell> cells{{0, static_cast<std::uint32_t>(n_)}};
    complete_ = true;
    dfs(0, 0, cells);
  }

  std::size_t best_cost() const { return best_cost_; }
  const std::vector<std::uint64_t>& best_rows() const { return best_rows_; }
  std::uint64_t visits() const { return visits_; }
  bool complete() const { return complete_; }

 private:
  const std::uint64_t* correct(std::uint64_t s) const { return &correct_[s * words_]; }

  void dfs(std::size_t min_size, std::size_t cost, const std::vector<Cell>& cells) {
    const std::size_t left = n_ - rows_.size();
    if (left == 0) {
      if (cost < best_cost_) {  // feasibility was enforced when the last row was added
        best_cost_ = cost;
        best_rows_ = rows_;
      }
      return;
    }
    if (options_.max_visits != 0 && visits_ >= options_.max_visits) {
      complete_ = false;
      return;
    }
    ++visits_;
    // Patterns whose deficit equals the rows left: every remaining row must be correct there.
    std::vector<std::uint64_t> tight(words_, 0);
    for (std::size_t u = 0; u < patterns_; ++u)
      if (threshold_ - count_[u] == static_cast<int>(left)) tight[u / 64] |= std::uint64_t{1} << (u % 64);
    for (std::size_t size = min_size; size <= n_; ++size) {
      if (cost + left * size >= best_cost_) break;  // rows come in non-decreasing size
      std::vector<std::uint32_t> take(cells.size(), 0);
      choose(cells, take, 0, size, 0, [&](std::uint64_t row) {
        if (cost + left * size >= best_cost_) return;  // the incumbent improved meanwhile
        const std::uint64_t* c = correct(row);
        for (std::size_t w = 0; w < words_; ++w)
          if ((tight[w] & ~c[w]) != 0) return;
        if (!apply(row, static_cast<int>(left) - 1)) {
          unapply(row);
          return;
        }
        std::vector<Cell> next;
        for (std::size_t k = 0; k < cells.size(); ++k) {
          if (take[k] > 0) next.push_back({cells[k].start, take[k]});
          if (take[k] < cells[k].length) next.push_back({cells[k].start + take[k], cells[k].length - take[k]});
        }
        rows_.push_back(row);
        dfs(size, cost + size, next);
        rows_.pop_back();
        unapply(row);
      });
      if (cost + left * size >= best_cost_) break;
    }
  }

  // Enumerates the rows of `size` that take the first take[k] columns of each cell k.
  template <typename Visit>
  void choose(const std::vector<Cell>& cells, std::vector<std::uint32_t>& take, std::size_t k, std::size_t remaining,
              std::uint64_t row, Visit&& visit) {
    if (k == cells.size()) {
      if (remaining == 0) visit(row);
      return;
    }
    std::size_t capacity_after = 0;
    for (std::size_t m = k + 1; m < cells.size(); ++m) capacity_after += cells[m].length;
    const std::size_t lo = remaining > capacity_after ? remaining - capacity_after : 0;
    const std::size_t hi = std::min<std::size_t>(remaining, cells[k].length);
    for (std::size_t t = lo; t <= hi; ++t) {
      take[k] = static_cast<std::uint32_t>(t);
      const std::uint64_t bits = ((std::uint64_t{1} << t) - 1) << cells[k].start;
      choose(cells, take, k + 1, remaining - t, row | bits, visit);
    }
    take[k] = 0;
  }

  // Adds the row's correctness; false if some pattern can no longer reach the threshold with
  // `left_after` more rows.
  bool apply(std::uint64_t row, int left_after) {
    const std::uint64_t* c = correct(row);
    bool feasible = true;
    for (std::size_t u = 0; u < patterns_; ++u) {
      count_[u] += static_cast<int>((c[u / 64] >> (u % 64)) & 1u);
      if (threshold_ - count_[u] > left_after) feasible = false;
    }
    return feasible;
  }
  void unapply(std::uint64_t row) {
    const std::uint64_t* c = correct(row);
    for (std::size_t u = 0; u < patterns_; ++u) count_[u] -= static_cast<int>((c[u / 64] >> (u % 64)) & 1u);
  }

  std::size_t n_;
  std::size_t patterns_;
  std::size_t words_;
  int threshold_;
  CodeSearchOptions options_;
  std::vector<std::uint64_t> correct_;
  std::vector<int> count_;
  std::vector<std::uint64_t> rows_;
  std::size_t best_cost_ = 0;
  std::vector<std::uint64_t> best_rows_;
  std::uint64_t visits_ = 0;
  bool complete_ = true;
};

}  // namespace

Result<CodeSearchResult> find_minimum_redundancy_code(std::size_t n, std::size_t b, const CodeSearchOptions& options) {
  if (n == 0 || n > kMaxSearchNodes)
    return make_error(ErrorCode::kInvalidArgument, "code search: n = " + std::to_string(n) + " is not in [1, " +
                                                       std::to_string(kMaxSearchNodes) + "]");
  if (b > (n - 1) / 2)  // 2b + 1 <= n, without forming 2b + 1 (a b near 2^63 would wrap)
    return make_error(ErrorCode::kInvalidArgument,
                      "code search: needs 2b + 1 <= n (n = " + std::to_string(n) + ", b = " + std::to_string(b) + ")");
  CodeSearchResult result;
  Search search(n, b, options);
  // Incumbent: the general construction for odd n, else n full rows (always b-tolerant for
  // 2b + 1 <= n: A(u) = n).
  AllocationMatrix incumbent(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) incumbent.set(i, j, true);
  if (n % 2 == 1) {
    incumbent = AllocationMatrix::deterministic(n, b).value();
    result.construction_ones = incumbent.ones();
  }
  search.set_incumbent(incumbent);
  search.run();
  std::vector<std::uint64_t> rows = search.best_rows();
  std::stable_sort(rows.begin(), rows.end(),
                   [](std::uint64_t x, std::uint64_t y) { return std::popcount(x) < std::popcount(y); });
  result.matrix = AllocationMatrix(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) result.matrix.set(i, j, (rows[i] >> j) & 1u);
  result.ones = search.best_cost();
  BALLOT_ENFORCE_EQ(result.ones, result.matrix.ones());
  result.proven_optimal = search.complete();
  result.visits = search.visits();
  return result;
}

}  // namespace ballot::coding
