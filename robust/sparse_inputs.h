// Aggregating sparse inputs: n vectors of dimension d given by their entries (what a sparsifying
// codec's messages decode to), every coordinate not listed +0.
//
// aggregate_sparse() returns what rule.aggregate() returns for the same vectors written out as an
// n×d matrix, bit for bit (value and report). A coordinate-wise rule (Aggregator::coordinate_wise())
// runs on the u columns some input lists plus one all-zero column, whose output is every other
// coordinate's: O(n·u + d/64) work and an n×(u+1) matrix, then the d-float output. Any other rule
// gets the n vectors written out. With n messages of k entries each, u ≤ n·k.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/result.h"
#include "robust/aggregator.h"

namespace ballot::robust {

// One input: indices strictly rising and below d, values[i] the value at indices[i].
struct SparseRow {
  std::span<const std::uint64_t> indices;
  std::span<const float> values;
};

// kInvalidArgument naming the row when a row breaks SparseRow's contract; otherwise the rule's
// own result (check(n) first, as aggregate() does).
Result<AggregationResult> aggregate_sparse(Aggregator& rule, std::span<const SparseRow> rows, std::size_t d);

}  // namespace ballot::robust
