// The registry: aggregation rules and pre-aggregators by name, with options from a string, for
// the command line and the evaluation runner. Strings use ballot::Spec syntax (core/spec.h):
//
//   "trimmed_mean:f=2"                  a rule
//   "nnm:f=2 > krum:f=2"                pre-aggregators, then exactly one rule (a Pipeline)
//   "bucketing:s=2 > clipping:tau=5 > median"
//
// Rules: mean, median, trimmed_mean, meamed, krum, multi_krum, bulyan, geometric_median,
// centered_clipping, mda, caf, smea, monna. Pre-aggregators: nnm, bucketing, clipping, arc. Every
// one accepts threads=N; the keys of each are listed in docs/robust.md. Unknown names or keys, malformed values and a
// pipeline that does not end in exactly one rule are kInvalidArgument errors naming the problem.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "robust/aggregator.h"

namespace ballot::robust {

// Pre-aggregators applied in order, then a rule. check(n) checks every stage with the number of
// inputs that reaches it. The report is the rule's, except `non_finite`, which names the
// pipeline's own inputs (found by the first stage); `selected`/`excluded` index the rule's inputs
// (for bucketing these are buckets).
class Pipeline final : public Aggregator {
 public:
  Pipeline(std::vector<std::unique_ptr<PreAggregator>> stages, std::unique_ptr<Aggregator> rule);
  std::string spec() const override;
  Status check(std::size_t n) const override;
  Result<AggregationResult> aggregate(const InputMatrix& inputs) override;
  using Aggregator::aggregate;

 private:
  std::vector<std::unique_ptr<PreAggregator>> stages_;
  std::unique_ptr<Aggregator> rule_;
};

// A rule, or a pipeline when the text contains '>'.
Result<std::unique_ptr<Aggregator>> make_aggregator(std::string_view text);
Result<std::unique_ptr<PreAggregator>> make_pre_aggregator(std::string_view text);

std::vector<std::string> rule_names();
std::vector<std::string> pre_aggregator_names();

}  // namespace ballot::robust
