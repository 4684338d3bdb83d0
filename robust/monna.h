// MoNNA's nearest-neighbour averaging (Farhadkhani, Guerraoui, Gupta, Hoang, Pinot, Stephan — ICML
// 2023, "Robust Collaborative Learning with Linear Gradient Overhead", the NNA step of MoNNA).
//
// The mean of the n − f inputs nearest to one designated input x_p, the pivot, itself included:
// MoNNA_{f,p}(x_1, …, x_n) = (1/(n − f)) Σ_{i∈N_p} x_i. In MoNNA's peer-to-peer setting each
// honest node aggregates around its own vector, which it trusts: the pivot is that node's index.
// It equals row p of NNM's output (robust/pre_aggregators.h) up to the rounding of distances. Precondition n ≥ 2f + 1
// and p < n.
//
// Distances to the pivot only (not all pairs): ‖x_i − x_p‖² summed directly (float lanes per 1024
// coordinates, blocks summed in double), so the cost is about two reads of the inputs plus one read
// of the n − f neighbours; no n×n Gram matrix. Unlike the Gram form ‖x_i‖² + ‖x_p‖² − 2 x_i·x_p of
// the other rules (and of NNM) it does not cancel for inputs far from the origin compared with
// their spread, so there MoNNA can pick better neighbours than row p of NNM. The pivot is always
// its own neighbour; other ties in distance go to the lower index. Non-finite inputs
// (and, as in the Gram-based rules, inputs whose squared norm overflows float) are never neighbours
// and count against f (k of them leave n − k inputs and f − min(k, f)); such a pivot is
// kPrecondition (there is nothing trusted to aggregate around). Deterministic for any thread count.
#pragma once

#include <cstddef>
#include <string>

#include "robust/aggregator.h"

namespace ballot::robust {

struct MonnaOptions {
  std::size_t f = 0;
  std::size_t pivot = 0;  // index of the trusted input (the aggregating node's own vector)
  std::size_t threads = 1;
};

class Monna final : public Aggregator {
 public:
  using Options = MonnaOptions;
  Monna() = default;
  explicit Monna(Options options) : options_(options) {}
  static Status check(std::size_t n, std::size_t f);  // n ≥ 2f + 1
  std::string spec() const override;
  Status check(std::size_t n) const override;  // also pivot < n
  // report.selected: the pivot's n − f nearest inputs; report.scores: squared distance of each
  // input to the pivot (+∞ for non-finite inputs).
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;

 private:
  Options options_;
};

}  // namespace ballot::robust
