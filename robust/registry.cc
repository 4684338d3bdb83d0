#include "robust/registry.h"

#include <functional>
#include <map>
#include <set>

#include "core/enforce.h"
#include "core/spec.h"
#include "robust/arc.h"
#include "robust/bulyan.h"
#include "robust/caf.h"
#include "robust/centered_clipping.h"
#include "robust/coordinate_wise.h"
#include "robust/geometric_median.h"
#include "robust/krum.h"
#include "robust/mda.h"
#include "robust/monna.h"
#include "robust/pre_aggregators.h"
#include "robust/smea.h"

namespace ballot::robust {
namespace {

Error bad(const Spec& spec, const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument, "'" + spec.to_string() + "': " + what);
}

Result<std::size_t> get_count(const Spec& spec, const std::string& key, std::size_t fallback,
                              std::size_t minimum = 0) {
  BALLOT_ASSIGN_OR_RETURN(const std::int64_t value, spec.get_int(key, static_cast<std::int64_t>(fallback)));
  if (value < static_cast<std::int64_t>(minimum))
    return bad(spec, "option '" + key + "' must be >= " + std::to_string(minimum) + ", got " + std::to_string(value));
  return static_cast<std::size_t>(value);
}

using RuleFactory = std::function<Result<std::unique_ptr<Aggregator>>(const Spec&)>;
using PreFactory = std::function<Result<std::unique_ptr<PreAggregator>>(const Spec&)>;

// A rule whose options are exactly f and threads.
template <typename Rule>
RuleFactory f_rule() {
  return [](const Spec& spec) -> Result<std::unique_ptr<Aggregator>> {
    BALLOT_TRY(spec.check_known({"f", "threads"}));
    typename Rule::Options options;
    BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
    BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
    return std::unique_ptr<Aggregator>(std::make_unique<Rule>(options));
  };
}

const std::map<std::string, RuleFactory>& rules() {
  static const std::map<std::string, RuleFactory> table = {
      {"mean",
       [](const Spec& spec) -> Result<std::unique_ptr<Aggregator>> {
         BALLOT_TRY(spec.check_known({"threads"}));
         MeanOptions options;
         BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
         return std::unique_ptr<Aggregator>(std::make_unique<Mean>(options));
       }},
      {"median", f_rule<CoordinateMedian>()},
      {"trimmed_mean", f_rule<TrimmedMean>()},
      {"meamed", f_rule<MeanAroundMedian>()},
      {"krum", f_rule<Krum>()},
      {"bulyan", f_rule<Bulyan>()},
      {"caf", f_rule<Caf>()},
      {"multi_krum",
       [](const Spec& spec) -> Result<std::unique_ptr<Aggregator>> {
         BALLOT_TRY(spec.check_known({"f", "m", "threads"}));
         MultiKrumOptions options;
         BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
         BALLOT_ASSIGN_OR_RETURN(options.m, get_count(spec, "m", 0));
         BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
         return std::unique_ptr<Aggregator>(std::make_unique<MultiKrum>(options));
       }},
      {"geometric_median",
       [](const Spec& spec) -> Result<std::unique_ptr<Aggregator>> {
         BALLOT_TRY(spec.check_known({"f", "max_iterations", "nu", "tolerance", "threads"}));
         GeometricMedianOptions options;
         BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
         BALLOT_ASSIGN_OR_RETURN(options.max_iterations, get_count(spec, "max_iterations", options.max_iterations));
         BALLOT_ASSIGN_OR_RETURN(options.nu, spec.get_double("nu", options.nu));
         BALLOT_ASSIGN_OR_RETURN(options.tolerance, spec.get_double("tolerance", options.tolerance));
         BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
         if (!(options.nu > 0)) return bad(spec, "nu must be > 0");
         if (!(options.tolerance >= 0)) return bad(spec, "tolerance must be >= 0");
         return std::unique_ptr<Aggregator>(std::make_unique<GeometricMedian>(options));
       }},
      {"centered_clipping",
       [](const Spec& spec) -> Result<std::unique_ptr<Aggregator>> {
         BALLOT_TRY(spec.check_known({"f", "tau", "iterations", "start", "threads"}));
         CenteredClippingOptions options;
         BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
         BALLOT_ASSIGN_OR_RETURN(options.tau, spec.get_double("tau", options.tau));
         BALLOT_ASSIGN_OR_RETURN(options.iterations, get_count(spec, "iterations", options.iterations));
         BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
         const std::string start = spec.get_string("start", "zero");
         if (start == "median") options.start = ClippingStart::kMedian;
         else if (start != "zero") return bad(spec, "start must be 'zero' or 'median', got '" + start + "'");
         if (!(options.tau > 0)) return bad(spec, "tau must be > 0");
         return std::unique_ptr<Aggregator>(std::make_unique<CenteredClipping>(options));
       }},
      {"mda",
       [](const Spec& spec) -> Result<std::unique_ptr<Aggregator>> {
         BALLOT_TRY(spec.check_known({"f", "max_subsets", "threads"}));
         MinimumDiameterAveragingOptions options;
         BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
         BALLOT_ASSIGN_OR_RETURN(options.max_subsets, spec.get_double("max_subsets", options.max_subsets));
         BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
         if (!(options.max_subsets >= 1)) return bad(spec, "max_subsets must be >= 1");
         return std::unique_ptr<Aggregator>(std::make_unique<MinimumDiameterAveraging>(options));
       }},
      {"smea",
       [](const Spec& spec) -> Result<std::unique_ptr<Aggregator>> {
         BALLOT_TRY(spec.check_known({"f", "max_subsets", "threads"}));
         SmeaOptions options;
         BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
         BALLOT_ASSIGN_OR_RETURN(options.max_subsets, spec.get_double("max_subsets", options.max_subsets));
         BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
         if (!(options.max_subsets >= 1)) return bad(spec, "max_subsets must be >= 1");
         return std::unique_ptr<Aggregator>(std::make_unique<Smea>(options));
       }},
      {"monna",
       [](const Spec& spec) -> Result<std::unique_ptr<Aggregator>> {
         BALLOT_TRY(spec.check_known({"f", "pivot", "threads"}));
         MonnaOptions options;
         BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
         BALLOT_ASSIGN_OR_RETURN(options.pivot, get_count(spec, "pivot", 0));
         BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
         return std::unique_ptr<Aggregator>(std::make_unique<Monna>(options));
       }},
  };
  return table;
}

const std::map<std::string, PreFactory>& pre_aggregators() {
  static const std::map<std::string, PreFactory> table = {
      {"nnm",
       [](const Spec& spec) -> Result<std::unique_ptr<PreAggregator>> {
         BALLOT_TRY(spec.check_known({"f", "threads"}));
         NearestNeighborMixingOptions options;
         BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
         BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
         return std::unique_ptr<PreAggregator>(std::make_unique<NearestNeighborMixing>(options));
       }},
      {"bucketing",
       [](const Spec& spec) -> Result<std::unique_ptr<PreAggregator>> {
         BALLOT_TRY(spec.check_known({"s", "seed", "shuffle", "threads"}));
         BucketingOptions options;
         BALLOT_ASSIGN_OR_RETURN(options.s, get_count(spec, "s", options.s, 1));
         BALLOT_ASSIGN_OR_RETURN(const std::size_t seed, get_count(spec, "seed", 0));
         options.seed = seed;
         BALLOT_ASSIGN_OR_RETURN(const std::size_t shuffle, get_count(spec, "shuffle", 1));
         if (shuffle > 1) return make_error(ErrorCode::kInvalidArgument, "bucketing: shuffle must be 0 or 1");
         options.shuffle = shuffle == 1;
         BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
         return std::unique_ptr<PreAggregator>(std::make_unique<Bucketing>(options));
       }},
      {"clipping",
       [](const Spec& spec) -> Result<std::unique_ptr<PreAggregator>> {
         BALLOT_TRY(spec.check_known({"tau", "threads"}));
         NormClippingOptions options;
         BALLOT_ASSIGN_OR_RETURN(options.tau, spec.get_double("tau", options.tau));
         BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
         if (!(options.tau > 0)) return bad(spec, "tau must be > 0");
         return std::unique_ptr<PreAggregator>(std::make_unique<NormClipping>(options));
       }},
      {"arc",
       [](const Spec& spec) -> Result<std::unique_ptr<PreAggregator>> {
         BALLOT_TRY(spec.check_known({"f", "threads"}));
         AdaptiveRobustClippingOptions options;
         BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
         BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
         return std::unique_ptr<PreAggregator>(std::make_unique<AdaptiveRobustClipping>(options));
       }},
  };
  return table;
}

template <typename Table>
std::string names_of(const Table& table) {
  std::string out;
  for (const auto& [name, factory] : table) out += (out.empty() ? "" : ", ") + name;
  return out;
}

Result<std::unique_ptr<Aggregator>> rule_from(const Spec& spec) {
  const auto it = rules().find(spec.name());
  if (it != rules().end()) return it->second(spec);
  if (pre_aggregators().count(spec.name()))
    return bad(spec, "'" + spec.name() + "' is a pre-aggregator; a pipeline must end in a rule (" +
                         names_of(rules()) + ")");
  return bad(spec, "unknown aggregation rule '" + spec.name() + "' (rules: " + names_of(rules()) + ")");
}

Result<std::unique_ptr<PreAggregator>> pre_from(const Spec& spec) {
  const auto it = pre_aggregators().find(spec.name());
  if (it != pre_aggregators().end()) return it->second(spec);
  if (rules().count(spec.name()))
    return bad(spec, "'" + spec.name() + "' is a rule; only pre-aggregators (" + names_of(pre_aggregators()) +
                         ") may precede the rule");
  return bad(spec, "unknown pre-aggregator '" + spec.name() + "' (pre-aggregators: " +
                       names_of(pre_aggregators()) + ")");
}

}  // namespace

Pipeline::Pipeline(std::vector<std::unique_ptr<PreAggregator>> stages, std::unique_ptr<Aggregator> rule)
    : stages_(std::move(stages)), rule_(std::move(rule)) {
  BALLOT_ENFORCE(rule_ != nullptr, "a pipeline needs a rule");
  for (const auto& stage : stages_) BALLOT_ENFORCE(stage != nullptr, "null pre-aggregator");
}

std::string Pipeline::spec() const {
  std::string out;
  for (const auto& stage : stages_) out += stage->spec() + " > ";
  return out + rule_->spec();
}

Status Pipeline::check(std::size_t n) const {
  for (const auto& stage : stages_) {
    BALLOT_TRY(stage->check(n));
    n = stage->outputs(n);
  }
  return rule_->check(n);
}

Result<AggregationResult> Pipeline::aggregate(const InputMatrix& inputs) {
  BALLOT_TRY(check(inputs.n()));
  std::vector<std::size_t> non_finite;
  Matrix current;
  InputMatrix view = inputs;
  for (std::size_t k = 0; k < stages_.size(); ++k) {
    BALLOT_ASSIGN_OR_RETURN(PreAggregation step, stages_[k]->apply(view));
    if (k == 0) non_finite = std::move(step.non_finite);
    current = std::move(step.output);
    view = current.view();
  }
  BALLOT_ASSIGN_OR_RETURN(AggregationResult result, rule_->aggregate(view));
  if (!stages_.empty()) result.report.non_finite = std::move(non_finite);
  return result;
}

Result<std::unique_ptr<Aggregator>> make_aggregator(std::string_view text) {
  BALLOT_ASSIGN_OR_RETURN(const std::vector<Spec> specs, Spec::parse_pipeline(text));
  if (specs.empty()) return make_error(ErrorCode::kInvalidArgument, "empty aggregation spec");
  BALLOT_ASSIGN_OR_RETURN(auto rule, rule_from(specs.back()));
  if (specs.size() == 1) return rule;
  std::vector<std::unique_ptr<PreAggregator>> stages;
  for (std::size_t k = 0; k + 1 < specs.size(); ++k) {
    BALLOT_ASSIGN_OR_RETURN(auto stage, pre_from(specs[k]));
    stages.push_back(std::move(stage));
  }
  return std::unique_ptr<Aggregator>(std::make_unique<Pipeline>(std::move(stages), std::move(rule)));
}

Result<std::unique_ptr<PreAggregator>> make_pre_aggregator(std::string_view text) {
  BALLOT_ASSIGN_OR_RETURN(const Spec spec, Spec::parse(text));
  return pre_from(spec);
}

std::vector<std::string> rule_names() {
  std::vector<std::string> out;
  for (const auto& [name, factory] : rules()) out.push_back(name);
  return out;
}

std::vector<std::string> pre_aggregator_names() {
  std::vector<std::string> out;
  for (const auto& [name, factory] : pre_aggregators()) out.push_back(name);
  return out;
}

}  // namespace ballot::robust
