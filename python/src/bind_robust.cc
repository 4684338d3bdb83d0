// ballot._native bindings of robust/: aggregation rules and pipelines from registry strings.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include "python/src/native.h"
#include "robust/centered_clipping.h"
#include "robust/registry.h"

namespace ballot::python {
namespace {

// (non_finite, selected, excluded, scores, iterations): a tuple, cheaper to build than a dict;
// the Python layer names the fields (robust.AggregationReport) when the report is read.
nb::tuple report_tuple(const robust::AggregationReport& report) {
  return nb::make_tuple(nb::cast(report.non_finite), nb::cast(report.selected), nb::cast(report.excluded),
                        nb::cast(report.scores), report.iterations);
}

// Owns one rule or pipeline. robust::Aggregator is not thread-safe (bucketing's counter, centered
// clipping's center) and the GIL is released while it runs, so calls on one object are serialised
// by a mutex: two Python threads sharing an Aggregator wait for each other instead of racing.
class NativeAggregator {
 public:
  explicit NativeAggregator(const std::string& spec) : rule_(unwrap(robust::make_aggregator(spec))) {}

  std::string spec() const { return rule_->spec(); }
  void check(std::size_t n) const { unwrap(rule_->check(n)); }

  // Centered clipping's v₀ for the next calls (None: back to its `start`); other rules refuse it.
  void set_center(nb::handle center) {
    auto* rule = dynamic_cast<robust::CenteredClipping*>(rule_.get());
    if (rule == nullptr)
      throw nb::value_error(("set_center: '" + rule_->spec() + "' is not centered_clipping").c_str());
    std::vector<float> values;
    if (!center.is_none()) {
      const std::span<const float> floats = cpu_floats(center, "center");
      values.assign(floats.begin(), floats.end());
    }
    const std::lock_guard lock(mutex_);
    rule->set_center(std::move(values));
  }

  // For bench/python: the C++ time of `repeats` aggregations of the same inputs (seconds each,
  // measured inside the module), so the Python call's overhead is a ratio taken in one run.
  std::vector<double> time_aggregate(nb::handle vectors, std::size_t repeats) {
    FloatRows rows = float_rows(vectors, "vectors");
    if (rows.device != Device::kCpu || rows.rows.empty()) throw nb::value_error("vectors: CPU vectors needed");
    std::vector<std::span<const float>> spans;
    for (const float* row : rows.rows) spans.emplace_back(row, rows.d);
    std::vector<double> seconds;
    std::optional<Error> error;
    {
      nb::gil_scoped_release released;
      const std::lock_guard lock(mutex_);
      for (std::size_t i = 0; i < repeats && !error; ++i) {
        const auto start = std::chrono::steady_clock::now();
        auto result = rule_->aggregate(std::span<const std::span<const float>>(spans));
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        if (!result.ok()) error = std::move(result).error();
      }
    }
    if (error) raise(*error);
    return seconds;
  }

  nb::tuple aggregate(nb::handle vectors) {
    FloatRows rows = float_rows(vectors, "vectors");
    if (rows.device != Device::kCpu)
      throw nb::value_error("vectors: robust rules run on the CPU in this build; move the tensors with .cpu()");
    if (rows.rows.empty()) throw nb::value_error("vectors: at least one vector is needed");
    std::vector<std::span<const float>> spans;
    spans.reserve(rows.rows.size());
    for (const float* row : rows.rows) spans.emplace_back(row, rows.d);
    Result<robust::AggregationResult> result = make_error(ErrorCode::kInternal, "not run");
    {
      nb::gil_scoped_release released;
      const std::lock_guard lock(mutex_);
      result = rule_->aggregate(std::span<const std::span<const float>>(spans));
    }
    robust::AggregationResult value = unwrap(std::move(result));
    nb::tuple report = report_tuple(value.report);
    return nb::make_tuple(to_numpy(std::move(value.value)), report);
  }

 private:
  std::unique_ptr<robust::Aggregator> rule_;
  std::mutex mutex_;
};

// One pre-aggregator (nnm, bucketing, clipping, arc): its stacked output is a new 2-D array.
class NativePreAggregator {
 public:
  explicit NativePreAggregator(const std::string& spec) : stage_(unwrap(robust::make_pre_aggregator(spec))) {}

  std::string spec() const { return stage_->spec(); }
  void check(std::size_t n) const { unwrap(stage_->check(n)); }
  std::size_t outputs(std::size_t n) const { return stage_->outputs(n); }

  nb::tuple apply(nb::handle vectors) {
    FloatRows rows = float_rows(vectors, "vectors");
    if (rows.device != Device::kCpu)
      throw nb::value_error("vectors: pre-aggregators run on the CPU in this build; move the tensors with .cpu()");
    if (rows.rows.empty()) throw nb::value_error("vectors: at least one vector is needed");
    std::vector<std::span<const float>> spans;
    for (const float* row : rows.rows) spans.emplace_back(row, rows.d);
    Result<robust::PreAggregation> result = make_error(ErrorCode::kInternal, "not run");
    {
      nb::gil_scoped_release released;
      const std::lock_guard lock(mutex_);
      Result<robust::InputMatrix> inputs =
          robust::InputMatrix::from_rows(std::span<const std::span<const float>>(spans));
      result = inputs.ok() ? stage_->apply(*inputs) : Result<robust::PreAggregation>(std::move(inputs).error());
    }
    robust::PreAggregation out = unwrap(std::move(result));
    using Values = decltype(out.output.values);
    auto* owned = new Values(std::move(out.output.values));
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Values*>(p); });
    nb::ndarray<nb::numpy, float, nb::ndim<2>> matrix(owned->data(), {out.output.n, out.output.d}, owner);
    return nb::make_tuple(matrix, nb::cast(out.non_finite));
  }

 private:
  std::unique_ptr<robust::PreAggregator> stage_;
  std::mutex mutex_;
};

}  // namespace

void register_robust(nb::module_& m) {
  nb::class_<NativePreAggregator>(m, "PreAggregator")
      .def(nb::init<const std::string&>(), nb::arg("spec"))
      .def_prop_ro("spec", &NativePreAggregator::spec)
      .def("check", &NativePreAggregator::check, nb::arg("n"))
      .def("outputs", &NativePreAggregator::outputs, nb::arg("n"))
      .def("apply", &NativePreAggregator::apply, nb::arg("vectors"));
  nb::class_<NativeAggregator>(m, "Aggregator")
      .def(nb::init<const std::string&>(), nb::arg("spec"))
      .def_prop_ro("spec", &NativeAggregator::spec)
      .def("check", &NativeAggregator::check, nb::arg("n"))
      .def("set_center", &NativeAggregator::set_center, nb::arg("center").none())
      .def("aggregate", &NativeAggregator::aggregate, nb::arg("vectors"))
      .def("time_aggregate", &NativeAggregator::time_aggregate, nb::arg("vectors"), nb::arg("repeats"));
  m.def("rule_names", &robust::rule_names);
  m.def("pre_aggregator_names", &robust::pre_aggregator_names);
}

}  // namespace ballot::python
