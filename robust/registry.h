// The registry: aggregation rules and pre-aggregators by name, with options from a string, for
// the command line and the evaluation runner. Strings use ballot::Spec syntax (core/spec.h):
//
//   "trimmed_mean:f=2"                  a rule
//   "nnm:f=2 > krum:f=2"                pre-aggregators, then exactly one rule (a Pipeline)
//   "bucketing:s=2 > clipping:tau=5 > median"
//
// The rules and pre-aggregators are the lines of rule_table() and pre_aggregator_table()
// (core/registry.h: name, keys, example, summary, factory); docs/robust.md documents each, and a
// test checks that it lists every name. Every one accepts threads=N besides its keys. Unknown
// names or keys, malformed values and a pipeline that does not end in exactly one rule are
// kInvalidArgument errors naming the problem.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/registry.h"
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

// The tables. A factory gets a Spec whose keys are already checked against the entry's `keys`
// (and threads).
using RuleFactory = Result<std::unique_ptr<Aggregator>> (*)(const Spec&);
using PreAggregatorFactory = Result<std::unique_ptr<PreAggregator>> (*)(const Spec&);
using RuleEntry = TableEntry<RuleFactory>;
using PreAggregatorEntry = TableEntry<PreAggregatorFactory>;
std::span<const RuleEntry> rule_table();
std::span<const PreAggregatorEntry> pre_aggregator_table();

// The names, in table order.
std::vector<std::string> rule_names();
std::vector<std::string> pre_aggregator_names();

// An entry's example with f=F added when the entry takes f: the standard instance that the tests
// (n = 11, f = 2) and the benchmarks run.
template <typename Entry>
std::string example_with_f(const Entry& entry, std::size_t f) {
  std::string out(entry.example);
  if (!has_key(entry.keys, "f")) return out;
  return out + (out.find(':') == std::string::npos ? ":" : ",") + "f=" + std::to_string(f);
}

}  // namespace ballot::robust
