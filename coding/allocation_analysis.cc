#include "coding/allocation_analysis.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/connected_components.hpp>
#include <cstdio>

namespace ballot::coding {

AllocationAnalysis analyze(const AllocationMatrix& g) {
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
  const std::size_t n = g.n();
  Graph graph(2 * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (g.get(i, j)) boost::add_edge(i, n + j, graph);

  AllocationAnalysis a;
  a.n = n;
  a.ones = boost::num_edges(graph);
  a.redundancy = g.redundancy();
  a.row_degree.resize(n);
  a.column_degree.resize(n);
  for (std::size_t v = 0; v < n; ++v) {
    a.row_degree[v] = static_cast<std::uint32_t>(boost::degree(v, graph));
    a.column_degree[v] = static_cast<std::uint32_t>(boost::degree(n + v, graph));
    if (a.row_degree[v] == 0) a.empty_rows.push_back(static_cast<std::uint32_t>(v));
    if (a.column_degree[v] == 0) a.empty_columns.push_back(static_cast<std::uint32_t>(v));
    if (a.row_degree[v] == n) ++a.full_rows;
  }
  if (n > 0) {
    a.min_column_degree = *std::min_element(a.column_degree.begin(), a.column_degree.end());
    a.max_column_degree = *std::max_element(a.column_degree.begin(), a.column_degree.end());
  }
  // DFS-based components: vertices are started in index order, so component ids follow the order
  // of each component's first vertex.
  a.component.resize(2 * n);
  a.num_components = n == 0 ? 0 : static_cast<std::size_t>(boost::connected_components(graph, a.component.data()));
  return a;
}

std::string AllocationAnalysis::summary() const {
  char line[256];
  std::snprintf(line, sizeof line,
                "n = %zu, ones = %zu, r = %.2f; nodes per partition %u..%u; full rows %zu; "
                "empty rows %zu, empty columns %zu; components %zu",
                n, ones, redundancy, min_column_degree, max_column_degree, full_rows, empty_rows.size(),
                empty_columns.size(), num_components);
  return line;
}

}  // namespace ballot::coding
