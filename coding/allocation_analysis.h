// Structure of an allocation matrix as the bipartite node–partition graph (Boost.Graph).
//
// Vertices 0..n-1 are voting nodes, n..2n-1 are partitions; an edge joins node i and partition j
// iff G[i][j] = 1. Reports the degrees (row sizes = partitions per node, column sizes = how many
// nodes cover each partition), empty rows (nodes that vote on nothing: their vote is the empty
// majority, all +1) and empty columns (partitions nobody computes: their signal is lost), and the
// connected components of the graph (isolated vertices count as components).
// Cost O(n²) for the scan plus O(n + ones) for the components. Deterministic; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "coding/allocation_matrix.h"

namespace ballot::coding {

struct AllocationAnalysis {
  std::size_t n = 0;
  std::size_t ones = 0;
  double redundancy = 0;                     // ones / n
  std::vector<std::uint32_t> row_degree;     // partitions per node
  std::vector<std::uint32_t> column_degree;  // nodes per partition (its replication)
  std::vector<std::uint32_t> empty_rows;     // nodes with no partition
  std::vector<std::uint32_t> empty_columns;  // partitions with no node
  std::uint32_t min_column_degree = 0;
  std::uint32_t max_column_degree = 0;
  std::size_t full_rows = 0;  // nodes holding every partition (their vote is always μ)
  // Connected components of the bipartite graph; component[v] for v < n is node v's component,
  // component[n + j] partition j's. Numbered 0.. in order of first vertex.
  std::size_t num_components = 0;
  std::vector<std::uint32_t> component;

  // A few lines for people: "n = 5, ones = 19, r = 3.80; ...".
  std::string summary() const;
};

AllocationAnalysis analyze(const AllocationMatrix& g);

}  // namespace ballot::coding
