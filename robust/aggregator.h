// The common interface of the robust aggregation rules (ALGORITHMS.md §5).
//
// An aggregation rule turns n input vectors of d floats (n workers' gradients) into one vector,
// tolerating up to f Byzantine inputs when its precondition on (n, f) holds. A pre-aggregator
// (NNM, bucketing, norm clipping) turns n inputs into n' inputs and composes in front of any rule
// (robust/registry.h builds such pipelines from strings).
//
// Inputs are viewed, never copied: InputMatrix is n row pointers of d floats, either over one
// contiguous n×d buffer or over a list of spans. Non-finite inputs (any NaN or ±Inf coordinate)
// never crash a rule and never win: they count as Byzantine, are left out, and are named in the
// report. Every rule is deterministic: the same inputs, options and ISA level give bit-identical
// outputs for any thread count. An Aggregator object is not thread-safe (some keep per-call state,
// e.g. bucketing's round counter); use one per thread.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "robust/detail/output_allocator.h"

namespace ballot::robust {

// A read-only view of n vectors of d floats. The data must outlive the view.
class InputMatrix {
 public:
  InputMatrix() = default;
  // Rows i·d .. i·d+d-1 of a contiguous buffer of n·d floats.
  InputMatrix(const float* data, std::size_t n, std::size_t d);
  // A contiguous buffer holding n vectors: data.size() must be a multiple of n (kInvalidArgument).
  static Result<InputMatrix> from_buffer(std::span<const float> data, std::size_t n);
  // A list of vectors, e.g. one per worker: all must have the same size (kInvalidArgument naming
  // the first that differs).
  static Result<InputMatrix> from_rows(std::span<const std::span<const float>> rows);
  static Result<InputMatrix> from_rows(const std::vector<std::vector<float>>& rows);

  std::size_t n() const noexcept { return rows_.size(); }
  std::size_t d() const noexcept { return d_; }
  const float* row(std::size_t i) const { return rows_[i]; }
  std::span<const float> row_span(std::size_t i) const { return {rows_[i], d_}; }
  const std::vector<const float*>& row_pointers() const noexcept { return rows_; }
  // The rows `indices` of this view (indices must be < n()).
  InputMatrix subset(std::span<const std::size_t> indices) const;
  // The distance in floats between consecutive rows when all rows are equally spaced (the
  // contiguous case), else 0.
  std::size_t uniform_stride() const noexcept;

 private:
  std::vector<const float*> rows_;
  std::size_t d_ = 0;
};

// An owned n×d row-major matrix: what a pre-aggregator produces. `values` is a std::vector whose
// resize() leaves new floats uninitialised (use assign() or resize(count, value) to fill), and
// whose large blocks are reused by the next output of the same size (robust/detail/output_allocator.h).
struct Matrix {
  std::vector<float, detail::OutputAllocator<float>> values;
  std::size_t n = 0;
  std::size_t d = 0;
  InputMatrix view() const { return InputMatrix(values.data(), n, d); }
};

// What a rule did with its inputs. All index lists are ascending indices into the rule's input.
struct AggregationReport {
  std::vector<std::size_t> non_finite;  // inputs with a NaN or ±Inf coordinate (never used)
  std::vector<std::size_t> selected;    // selection rules: the inputs the output is built from
  std::vector<std::size_t> excluded;    // inputs that do not contribute to the output at all
  std::vector<double> scores;           // per-input score where the rule has one (Krum), else empty
  std::size_t iterations = 0;           // iterative rules: iterations run
};

struct AggregationResult {
  std::vector<float> value;  // d floats
  AggregationReport report;
};

class Aggregator {
 public:
  virtual ~Aggregator() = default;
  // The canonical spec of this rule with its options ("trimmed_mean:f=2"), accepted by the registry.
  virtual std::string spec() const = 0;
  // The rule's precondition for n inputs: kPrecondition naming the violated bound.
  virtual Status check(std::size_t n) const = 0;
  // Aggregates n ≥ 1 inputs of d ≥ 0 floats: check(n) first, then the rule.
  virtual Result<AggregationResult> aggregate(const InputMatrix& inputs) = 0;
  // True when output coordinate j is a function of input column j alone, the same for every j
  // (given which rows are non-finite): the rule may then run on a subset of the columns
  // (robust/sparse_inputs.h).
  virtual bool coordinate_wise() const noexcept { return false; }

  Result<AggregationResult> aggregate(std::span<const std::span<const float>> rows);
};

// What a pre-aggregator did: its output and the inputs it found non-finite.
struct PreAggregation {
  Matrix output;
  std::vector<std::size_t> non_finite;  // ascending indices into the pre-aggregator's input
};

// What a pre-aggregator that only rescales its rows would write, without writing it: output row i
// is the floats (float)(scales[i] · x_i) (a non-finite row: scale 1, passed on unchanged).
struct RowScales {
  std::vector<float> scales;            // n factors in [0, 1] (a shrink never overflows)
  std::vector<std::size_t> non_finite;  // as PreAggregation::non_finite
};

class PreAggregator {
 public:
  virtual ~PreAggregator() = default;
  virtual std::string spec() const = 0;
  virtual Status check(std::size_t n) const = 0;
  // The number of outputs for n inputs.
  virtual std::size_t outputs(std::size_t n) const { return n; }
  // Non-finite inputs are never mixed into finite outputs; a rule after it will exclude them.
  virtual Result<PreAggregation> apply(const InputMatrix& inputs) = 0;
  // A stage whose every output row is its input row times one factor (clipping, ARC) returns the
  // factors apply() would use, after the same checks, without writing any row: a mean after it
  // then reads the inputs once more instead of a written copy (Pipeline). Other stages: nullopt.
  virtual Result<std::optional<RowScales>> row_scales(const InputMatrix& inputs);
};

}  // namespace ballot::robust
