// AllocationMatrix: the election code G of Sohn et al. (NeurIPS 2020), ALGORITHMS.md §3.
//
// G is n×n over {0,1}: rows are voting nodes, columns are data partitions; G[i][j] = 1 iff
// partition j is assigned to node i. The computational redundancy is r = ones / n. G = I is
// signSGD with majority vote.
//
// Factories: identity, Bernoulli(r) with the reference's row-redraw rule, the paper's n = 5
// deterministic code, the general deterministic construction for odd n and any b, explicit rows,
// a plain text file, and a Spec string for the command line. Everything is deterministic for a
// given seed. Values are immutable after construction except through set(); copies are cheap for
// the sizes in use (n ≤ kMaxNodes). Not thread-safe for concurrent set(); concurrent reads are fine.
//
// Text format (save/parse): one row per line, n entries of '0' or '1', optionally separated by
// spaces, tabs or commas; '#' starts a comment; blank lines are skipped; the number of rows must
// equal the number of entries per row. Malformed text is ErrorCode::kMalformed naming the line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/spec.h"

namespace ballot::coding {

class AllocationMatrix {
 public:
  // Largest n accepted from files, specs and factories (n² bits = 2 MiB).
  static constexpr std::size_t kMaxNodes = 4096;
  // Attempts of the Bernoulli row-redraw rule before it gives up (the rule loops until no row is
  // empty; with p = r/n this fails for tiny r only).
  static constexpr int kMaxBernoulliAttempts = 20000;

  AllocationMatrix() = default;
  // n×n zeros; n ≤ kMaxNodes (BALLOT_ENFORCE: callers with user input use the Result factories).
  explicit AllocationMatrix(std::size_t n);

  // G = I: signSGD with majority vote.
  static AllocationMatrix identity(std::size_t n);
  // G[i][j] ~ Bernoulli(r / n) i.i.d., the whole matrix redrawn until no row is empty (the
  // reference code's rule; the realised r therefore exceeds the nominal one, ≈ 2.25 for r = 2 at
  // n = 9 or 15). Reproducible: the draw depends only on (n, r, seed). Errors: n = 0 or > kMaxNodes,
  // r not in (0, n], or kMaxBernoulliAttempts exceeded.
  static Result<AllocationMatrix> bernoulli(std::size_t n, double r, std::uint64_t seed);
  // The paper's n = 5, b = 1 code (r = 3.8): rows {1}, {2,3,4}, {1..5} ×3 (1-based partitions).
  static AllocationMatrix paper_n5();
  // ALGORITHMS.md §3 general construction for odd n and 2b + 1 ≤ n: with L = n − 2b − 1, for
  // k < L/2 node 2k gets {k} and node 2k+1 gets every partition except {k, n−1−k}; the last
  // 2b + 1 nodes get every partition. Ones = (2b+1)·n + (L/2)(n−1). Tolerates b Byzantine nodes
  // for every odd n (tolerance.h, structural_bound, proves it). Reproduces paper_n5() at (5, 1).
  static Result<AllocationMatrix> deterministic(std::size_t n, std::size_t b);
  // rows[i] lists the partitions of node i (any order; duplicates and indices ≥ n are errors).
  static Result<AllocationMatrix> from_rows(std::size_t n, const std::vector<std::vector<std::uint32_t>>& rows);

  // Text I/O (format above). load() reads at most 64 MiB.
  static Result<AllocationMatrix> parse(std::string_view text);
  static Result<AllocationMatrix> load(const std::string& path);
  std::string to_text() const;
  Status save(const std::string& path) const;

  std::size_t n() const noexcept { return n_; }
  bool get(std::size_t node, std::size_t partition) const;
  void set(std::size_t node, std::size_t partition, bool value);

  std::size_t ones() const noexcept;
  // r = ones / n (0 for an empty matrix).
  double redundancy() const noexcept;
  std::size_t row_size(std::size_t node) const;
  std::size_t column_size(std::size_t partition) const;
  // Partitions of `node`, ascending.
  std::vector<std::uint32_t> row(std::size_t node) const;
  // Nodes that hold `partition`, ascending.
  std::vector<std::uint32_t> column(std::size_t partition) const;
  // Row as a bit mask (bit j = partition j); precondition n ≤ 64.
  std::uint64_t row_mask(std::size_t node) const;

  friend bool operator==(const AllocationMatrix& a, const AllocationMatrix& b) noexcept;

 private:
  std::size_t n_ = 0;
  std::size_t words_per_row_ = 0;
  std::vector<std::uint64_t> bits_;
};

// Builds a matrix from a Spec (core/spec.h) for n nodes, the syntax of the command line:
//   "identity" | "bernoulli:r=2[,seed=S]" | "paper5" | "deterministic:b=1" | "file:path=P"
// `seed` is the default seed of "bernoulli" (the spec's seed= overrides it). Unknown names and
// options are kInvalidArgument; "paper5" needs n = 5; "file" checks the loaded n against `n`
// unless n = 0.
Result<AllocationMatrix> make_allocation_matrix(const Spec& spec, std::size_t n, std::uint64_t seed);

}  // namespace ballot::coding
