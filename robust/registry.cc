#include "robust/registry.h"

#include <cmath>

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

Result<std::size_t> get_count(const Spec& spec, const std::string& key, std::size_t fallback, std::size_t minimum = 0) {
  BALLOT_ASSIGN_OR_RETURN(const std::int64_t value, spec.get_int(key, static_cast<std::int64_t>(fallback)));
  if (value < static_cast<std::int64_t>(minimum))
    return bad(spec, "option '" + key + "' must be >= " + std::to_string(minimum) + ", got " + std::to_string(value));
  return static_cast<std::size_t>(value);
}

using Made = Result<std::unique_ptr<Aggregator>>;
using MadePre = Result<std::unique_ptr<PreAggregator>>;

// A rule whose options are exactly f (and threads).
template <typename Rule>
Made f_rule(const Spec& spec) {
  typename Rule::Options options;
  BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
  BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
  return std::unique_ptr<Aggregator>(std::make_unique<Rule>(options));
}

Made make_mean(const Spec& spec) {
  MeanOptions options;
  BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
  return std::unique_ptr<Aggregator>(std::make_unique<Mean>(options));
}

Made make_multi_krum(const Spec& spec) {
  MultiKrumOptions options;
  BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
  BALLOT_ASSIGN_OR_RETURN(options.m, get_count(spec, "m", 0));
  BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
  return std::unique_ptr<Aggregator>(std::make_unique<MultiKrum>(options));
}

Made make_geometric_median(const Spec& spec) {
  GeometricMedianOptions options;
  BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
  BALLOT_ASSIGN_OR_RETURN(options.max_iterations, get_count(spec, "max_iterations", options.max_iterations));
  BALLOT_ASSIGN_OR_RETURN(options.nu, spec.get_double("nu", options.nu));
  BALLOT_ASSIGN_OR_RETURN(options.tolerance, spec.get_double("tolerance", options.tolerance));
  BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
  if (!(options.nu > 0)) return bad(spec, "nu must be > 0");
  if (!std::isfinite(options.tolerance)) return bad(spec, "tolerance must be finite (< 0: never stop early)");
  const std::string start = spec.get_string("start", "mean");
  if (start == "zero")
    options.start = WeiszfeldStart::kZero;
  else if (start != "mean")
    return bad(spec, "start must be 'mean' or 'zero', got '" + start + "'");
  return std::unique_ptr<Aggregator>(std::make_unique<GeometricMedian>(options));
}

Made make_centered_clipping(const Spec& spec) {
  CenteredClippingOptions options;
  BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
  BALLOT_ASSIGN_OR_RETURN(options.tau, spec.get_double("tau", options.tau));
  BALLOT_ASSIGN_OR_RETURN(options.iterations, get_count(spec, "iterations", options.iterations));
  BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
  const std::string start = spec.get_string("start", "zero");
  if (start == "median")
    options.start = ClippingStart::kMedian;
  else if (start != "zero")
    return bad(spec, "start must be 'zero' or 'median', got '" + start + "'");
  if (!(options.tau > 0)) return bad(spec, "tau must be > 0");
  return std::unique_ptr<Aggregator>(std::make_unique<CenteredClipping>(options));
}

// MDA and SMEA: f, max_subsets (the cap on C(n, f) subsets).
template <typename Rule>
Made subset_rule(const Spec& spec) {
  typename Rule::Options options;
  BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
  BALLOT_ASSIGN_OR_RETURN(options.max_subsets, spec.get_double("max_subsets", options.max_subsets));
  BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
  if (!(options.max_subsets >= 1)) return bad(spec, "max_subsets must be >= 1");
  return std::unique_ptr<Aggregator>(std::make_unique<Rule>(options));
}

Made make_monna(const Spec& spec) {
  MonnaOptions options;
  BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
  BALLOT_ASSIGN_OR_RETURN(options.pivot, get_count(spec, "pivot", 0));
  BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
  return std::unique_ptr<Aggregator>(std::make_unique<Monna>(options));
}

MadePre make_nnm(const Spec& spec) {
  NearestNeighborMixingOptions options;
  BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
  BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
  return std::unique_ptr<PreAggregator>(std::make_unique<NearestNeighborMixing>(options));
}

MadePre make_bucketing(const Spec& spec) {
  BucketingOptions options;
  BALLOT_ASSIGN_OR_RETURN(options.s, get_count(spec, "s", options.s, 1));
  BALLOT_ASSIGN_OR_RETURN(const std::size_t seed, get_count(spec, "seed", 0));
  options.seed = seed;
  BALLOT_ASSIGN_OR_RETURN(const std::size_t shuffle, get_count(spec, "shuffle", 1));
  if (shuffle > 1) return make_error(ErrorCode::kInvalidArgument, "bucketing: shuffle must be 0 or 1");
  options.shuffle = shuffle == 1;
  BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
  return std::unique_ptr<PreAggregator>(std::make_unique<Bucketing>(options));
}

MadePre make_clipping(const Spec& spec) {
  NormClippingOptions options;
  BALLOT_ASSIGN_OR_RETURN(options.tau, spec.get_double("tau", options.tau));
  BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
  if (!(options.tau > 0)) return bad(spec, "tau must be > 0");
  return std::unique_ptr<PreAggregator>(std::make_unique<NormClipping>(options));
}

MadePre make_arc(const Spec& spec) {
  AdaptiveRobustClippingOptions options;
  BALLOT_ASSIGN_OR_RETURN(options.f, get_count(spec, "f", 0));
  BALLOT_ASSIGN_OR_RETURN(options.threads, get_count(spec, "threads", 1, 1));
  return std::unique_ptr<PreAggregator>(std::make_unique<AdaptiveRobustClipping>(options));
}

// One line per rule: name, keys (besides threads), example (valid at n = 11 once f=2 is added),
// summary, factory. docs/robust.md has the full table.
const RuleEntry kRules[] = {
    {"mean", "", "mean", "(1/n) sum of the inputs; no defence", &make_mean},
    {"median", "f", "median", "coordinate-wise median (Yin et al., ICML 2018)", &f_rule<CoordinateMedian>},
    {"trimmed_mean", "f", "trimmed_mean", "coordinate-wise mean without the f largest and f smallest (Yin et al. 2018)",
     &f_rule<TrimmedMean>},
    {"meamed", "f", "meamed", "coordinate-wise mean of the n - f values nearest the median (Xie et al. 2018)",
     &f_rule<MeanAroundMedian>},
    {"krum", "f", "krum", "the input nearest its n - f - 2 neighbours (Blanchard et al., NeurIPS 2017)", &f_rule<Krum>},
    {"multi_krum", "f m", "multi_krum", "mean of the m best-scored Krum inputs (Blanchard et al. 2017)",
     &make_multi_krum},
    {"bulyan", "f", "bulyan",
     "repeated Krum, then per coordinate the mean of the values closest to the median (El Mhamdi et al., ICML 2018)",
     &f_rule<Bulyan>},
    {"geometric_median", "f start max_iterations nu tolerance", "geometric_median",
     "smoothed Weiszfeld geometric median (Pillutla et al., RFA)", &make_geometric_median},
    {"centered_clipping", "f tau iterations start", "centered_clipping:tau=10,start=median,iterations=5",
     "iterative clipping around a centre (Karimireddy et al., ICML 2021)", &make_centered_clipping},
    {"mda", "f max_subsets", "mda", "mean of the n - f inputs of smallest diameter (El Mhamdi et al. 2018)",
     &subset_rule<MinimumDiameterAveraging>},
    {"caf", "f", "caf", "covariance-bound agnostic filter (Allouah et al., ICML 2025)", &f_rule<Caf>},
    {"smea", "f max_subsets", "smea", "mean of the n - f inputs of smallest top eigenvalue (Allouah et al., ICML 2023)",
     &subset_rule<Smea>},
    {"monna", "f pivot", "monna:pivot=5",
     "mean of the n - f inputs nearest the trusted one (Farhadkhani et al., ICML 2023)", &make_monna},
};

const PreAggregatorEntry kPreAggregators[] = {
    {"nnm", "f", "nnm", "each input -> mean of its n - f nearest (Allouah et al., AISTATS 2023)", &make_nnm},
    {"bucketing", "s seed shuffle", "bucketing:s=2,seed=3",
     "shuffle, then average buckets of s (Karimireddy et al., ICLR 2022)", &make_bucketing},
    {"clipping", "tau", "clipping:tau=100", "clip each input to norm tau", &make_clipping},
    {"arc", "f", "arc", "adaptive robust clipping (Allouah et al., ICLR 2025)", &make_arc},
};

template <typename Entry>
auto build(const Entry& entry, const Spec& spec) -> decltype(entry.make(spec)) {
  BALLOT_TRY(spec.check_known(key_set(entry.keys, {"threads"})));
  return entry.make(spec);
}

Made rule_from(const Spec& spec) {
  if (const RuleEntry* entry = find_entry(rule_table(), spec.name())) return build(*entry, spec);
  if (find_entry(pre_aggregator_table(), spec.name()) != nullptr)
    return bad(spec, "'" + spec.name() + "' is a pre-aggregator; a pipeline must end in a rule (" +
                         joined_names(rule_table()) + ")");
  return bad(spec, "unknown aggregation rule '" + spec.name() + "' (rules: " + joined_names(rule_table()) + ")");
}

MadePre pre_from(const Spec& spec) {
  if (const PreAggregatorEntry* entry = find_entry(pre_aggregator_table(), spec.name())) return build(*entry, spec);
  if (find_entry(rule_table(), spec.name()) != nullptr)
    return bad(spec, "'" + spec.name() + "' is a rule; only pre-aggregators (" + joined_names(pre_aggregator_table()) +
                         ") may precede the rule");
  return bad(spec, "unknown pre-aggregator '" + spec.name() +
                       "' (pre-aggregators: " + joined_names(pre_aggregator_table()) + ")");
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
  // A last stage that only rescales its rows (clipping, ARC) in front of the mean is not written
  // out: the mean reads the stage's input with the factors (a read for the norms, a read for the
  // sums, against a read, a write and a read), with the same bits.
  auto* const mean = dynamic_cast<Mean*>(rule_.get());
  for (std::size_t k = 0; k < stages_.size(); ++k) {
    if (mean != nullptr && k + 1 == stages_.size()) {
      BALLOT_ASSIGN_OR_RETURN(std::optional<RowScales> scaled, stages_[k]->row_scales(view));
      if (scaled) {
        if (k == 0) non_finite = std::move(scaled->non_finite);
        BALLOT_ASSIGN_OR_RETURN(AggregationResult result, mean->aggregate_scaled(view, scaled->scales));
        result.report.non_finite = std::move(non_finite);
        return result;
      }
    }
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

std::span<const RuleEntry> rule_table() { return kRules; }
std::span<const PreAggregatorEntry> pre_aggregator_table() { return kPreAggregators; }

std::vector<std::string> rule_names() { return entry_names(rule_table()); }
std::vector<std::string> pre_aggregator_names() { return entry_names(pre_aggregator_table()); }

}  // namespace ballot::robust
