#include "robust/sparse_inputs.h"

#include <bit>
#include <string>
#include <vector>

#include "core/bit_vector.h"

namespace ballot::robust {
namespace {

Status check_row(const SparseRow& row, std::size_t index, std::size_t d) {
  auto invalid = [index](const std::string& what) {
    return make_error(ErrorCode::kInvalidArgument, "sparse input " + std::to_string(index) + ": " + what);
  };
  if (row.indices.size() != row.values.size()) {
    return invalid(std::to_string(row.indices.size()) + " indices for " + std::to_string(row.values.size()) +
                   " values");
  }
  for (std::size_t j = 0; j < row.indices.size(); ++j) {
    if (row.indices[j] >= d) return invalid("index " + std::to_string(row.indices[j]) + " >= d = " + std::to_string(d));
    if (j > 0 && row.indices[j] <= row.indices[j - 1]) return invalid("indices not strictly rising");
  }
  return {};
}

// The n vectors of d floats the rows stand for (one block each, as decoding each message into its
// own vector gives: an allocator that keeps freed blocks reuses them the next round).
std::vector<std::vector<float>> dense_rows(std::span<const SparseRow> rows, std::size_t d) {
  std::vector<std::vector<float>> out;
  out.reserve(rows.size());
  for (const SparseRow& row : rows) {
    auto& dense = out.emplace_back(d, 0.0f);
    for (std::size_t j = 0; j < row.indices.size(); ++j) dense[row.indices[j]] = row.values[j];
  }
  return out;
}

}  // namespace

Result<AggregationResult> aggregate_sparse(Aggregator& rule, std::span<const SparseRow> rows, std::size_t d) {
  const std::size_t n = rows.size();
  for (std::size_t r = 0; r < n; ++r) BALLOT_TRY(check_row(rows[r], r, d));
  if (!rule.coordinate_wise() || d == 0) {
    const auto dense = dense_rows(rows, d);
    BALLOT_ASSIGN_OR_RETURN(const auto inputs, InputMatrix::from_rows(dense));
    return rule.aggregate(inputs);
  }
  // The listed columns: a bitmap of d bits, and per 64-bit word the number of listed columns
  // before it, so that column c of the data is column rank(c) of the gathered matrix.
  const std::size_t words = BitVector::words_for(d);
  std::vector<std::uint64_t> listed(words, 0);
  for (const SparseRow& row : rows) {
    for (const std::uint64_t c : row.indices) listed[c / 64] |= std::uint64_t{1} << (c % 64);
  }
  std::vector<std::uint64_t> before(words);
  std::size_t u = 0;
  for (std::size_t w = 0; w < words; ++w) {
    before[w] = u;
    u += static_cast<std::size_t>(std::popcount(listed[w]));
  }
  auto rank = [&](std::uint64_t c) {
    const std::uint64_t below = listed[c / 64] & ((std::uint64_t{1} << (c % 64)) - 1);
    return before[c / 64] + static_cast<std::size_t>(std::popcount(below));
  };
  // Column u (when some coordinate is unlisted) is all zeros: its output is theirs.
  const std::size_t width = u < d ? u + 1 : u;
  std::vector<float> gathered(n * width, 0.0f);
  for (std::size_t r = 0; r < n; ++r) {
    float* row = gathered.data() + r * width;
    for (std::size_t j = 0; j < rows[r].indices.size(); ++j) row[rank(rows[r].indices[j])] = rows[r].values[j];
  }
  BALLOT_ASSIGN_OR_RETURN(auto result, rule.aggregate(InputMatrix(gathered.data(), n, width)));
  std::vector<float> value(d, u < d ? result.value[u] : 0.0f);
  std::size_t next = 0;
  for (std::size_t w = 0; w < words; ++w) {
    for (std::uint64_t bits = listed[w]; bits != 0; bits &= bits - 1) {
      value[w * 64 + static_cast<std::size_t>(std::countr_zero(bits))] = result.value[next++];
    }
  }
  result.value = std::move(value);
  return result;
}

}  // namespace ballot::robust
