// ballot._native bindings of robust/: aggregation rules and pipelines from registry strings.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include "core/config.h"
#include "python/src/native.h"
#include "robust/centered_clipping.h"
#include "robust/registry.h"

#if BALLOT_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_kernels.h"
#include "robust/cuda/distances.h"
#include "robust/cuda/robust_cuda.h"
#endif

namespace ballot::python {
namespace {

// (non_finite, selected, excluded, scores, iterations): a tuple, cheaper to build than a dict;
// the Python layer names the fields (robust.AggregationReport) when the report is read.
nb::tuple report_tuple(const robust::AggregationReport& report) {
  return nb::make_tuple(nb::cast(report.non_finite), nb::cast(report.selected), nb::cast(report.excluded),
                        nb::cast(report.scores), report.iterations);
}

// CUDA rows copied to the host (in order, on `stream`, which is then synchronised), for the rules
// and stages without a device twin; kInvalidArgument when this build has no CUDA.
Result<std::vector<float>> rows_to_host(const FloatRows& rows, std::uintptr_t stream) {
#if BALLOT_HAVE_CUDA
  BALLOT_TRY(require_current_device(rows.arrays.front().device_id()));
  const std::size_t n = rows.rows.size(), d = rows.d;
  std::vector<float> host(n * d);
  const auto cuda_stream = reinterpret_cast<cudaStream_t>(stream);
  // One copy when the rows lie one after the other (a contiguous 2-D tensor), else one per row.
  bool contiguous = true;
  for (std::size_t i = 1; i < n && contiguous; ++i) contiguous = rows.rows[i] == rows.rows[0] + i * d;
  const std::size_t copies = contiguous ? 1 : n, floats = contiguous ? n * d : d;
  for (std::size_t i = 0; i < copies && floats > 0; ++i) {
    BALLOT_TRY(kernels::cuda::cuda_status(
        cudaMemcpyAsync(host.data() + i * d, rows.rows[i], 4 * floats, cudaMemcpyDeviceToHost, cuda_stream),
        "copy to the host"));
  }
  BALLOT_TRY(kernels::cuda::cuda_status(cudaStreamSynchronize(cuda_stream), "copy to the host"));
  return host;
#else
  (void)rows;
  (void)stream;
  return make_error(ErrorCode::kInvalidArgument,
                    "vectors: this build has no CUDA (ballot.has_cuda is False); move the tensors with .cpu()");
#endif
}

std::vector<std::span<const float>> spans_of(const std::vector<float>& host, std::size_t n, std::size_t d) {
  std::vector<std::span<const float>> spans;
  for (std::size_t i = 0; i < n; ++i) spans.emplace_back(host.data() + i * d, d);
  return spans;
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
      const auto floats = cpu_floats(center, "center");
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

  // CPU rows in place; CUDA rows (stream: torch's current one on their device) copied to the host
  // first. Returns (value as a numpy array, report).
  nb::tuple aggregate(nb::handle vectors, std::uintptr_t stream) {
    FloatRows rows = float_rows(vectors, "vectors");
    if (rows.rows.empty()) throw nb::value_error("vectors: at least one vector is needed");
    Result<robust::AggregationResult> result = make_error(ErrorCode::kInternal, "not run");
    {
      nb::gil_scoped_release released;
      const std::lock_guard lock(mutex_);
      result = run_on_host(rows, stream);
    }
    robust::AggregationResult value = unwrap(std::move(result));
    nb::tuple report = report_tuple(value.report);
    return nb::make_tuple(to_numpy(std::move(value.value)), report);
  }

  // CUDA rows aggregated into `out` (d float32 on their device), on `stream`. The rules with a
  // device twin run there — the coordinate-wise ones (robust/cuda: mean, median, trimmed mean,
  // MeaMed; n ≤ 64) and Krum and multi-Krum (a cuBLAS Gram matrix, the choice on the host) —
  // reading a 2-D tensor's rows in place (a list is first gathered into one device buffer); the
  // other rules copy the rows to the host, run on the CPU and copy the value back. Returns the
  // report; the stream is synchronised (the report needs the non-finite rows).
  nb::tuple aggregate_into(nb::handle vectors, nb::handle out, std::uintptr_t stream) {
    FloatRows rows = float_rows(vectors, "vectors");
    if (rows.rows.empty()) throw nb::value_error("vectors: at least one vector is needed");
    if (rows.device != Device::kCuda) throw nb::value_error("vectors: aggregate_into takes CUDA vectors");
    const WritableArray out_array = as_writable(out, "out");
    const auto [values, out_device] = floats_on_device(out, "out", /*writable=*/true);
    if (out_device != Device::kCuda || out_array.device_id() != rows.arrays[0].device_id())
      throw nb::value_error("out: must be on the vectors' CUDA device");
    if (values.size() != rows.d)
      throw nb::value_error(
          ("out: has " + std::to_string(values.size()) + " elements, the vectors " + std::to_string(rows.d)).c_str());
    Result<robust::AggregationReport> result = make_error(ErrorCode::kInternal, "not run");
    {
      nb::gil_scoped_release released;
      const std::lock_guard lock(mutex_);
      result = run_on_cuda(rows, rows.arrays[0].device_id(), values.data(), stream);
    }
    return report_tuple(unwrap(std::move(result)));
  }

  ~NativeAggregator() {
#if BALLOT_HAVE_CUDA
    if (staged_ != nullptr) cudaFree(staged_);
    if (word_ != nullptr) cudaFree(word_);
#endif
  }

 private:
  // Under mutex_, without the GIL.
  Result<robust::AggregationResult> run_on_host(const FloatRows& rows, std::uintptr_t stream) {
    if (rows.device == Device::kCpu) {
      std::vector<std::span<const float>> spans;
      spans.reserve(rows.rows.size());
      for (const float* row : rows.rows) spans.emplace_back(row, rows.d);
      return rule_->aggregate(std::span<const std::span<const float>>(spans));
    }
    BALLOT_ASSIGN_OR_RETURN(const std::vector<float> host, rows_to_host(rows, stream));
    const auto spans = spans_of(host, rows.rows.size(), rows.d);
    return rule_->aggregate(std::span<const std::span<const float>>(spans));
  }

  Result<robust::AggregationReport> run_on_cuda(const FloatRows& rows, int device_id, float* d_out,
                                                std::uintptr_t stream) {
#if BALLOT_HAVE_CUDA
    BALLOT_TRY(require_current_device(device_id));
    const auto cuda_stream = reinterpret_cast<cudaStream_t>(stream);
    const std::size_t n = rows.rows.size(), d = rows.d;
    const auto twin = robust::cuda::device_rule(*rule_);
    const auto distance_twin = robust::cuda::distance_rule(*rule_);
    // The rule on the host, its value copied back.
    auto on_host = [&]() -> Result<robust::AggregationReport> {
      BALLOT_ASSIGN_OR_RETURN(robust::AggregationResult result, run_on_host(rows, stream));
      BALLOT_TRY(kernels::cuda::cuda_status(
          cudaMemcpyAsync(d_out, result.value.data(), 4 * d, cudaMemcpyHostToDevice, cuda_stream),
          "copy to the device"));
      BALLOT_TRY(kernels::cuda::cuda_status(cudaStreamSynchronize(cuda_stream), "copy to the device"));
      return std::move(result.report);
    };
    if ((!twin || n > robust::cuda::kMaxInputs) && !distance_twin) return on_host();
    if (distance_twin) {
      BALLOT_TRY(robust::cuda::chosen_count(*distance_twin, n));
    } else {
      BALLOT_TRY(robust::cuda::check(twin->rule, n, twin->f));
    }
    // Rows one after the other with stride d are read in place; others are gathered first.
    bool in_place = true;
    for (std::size_t i = 1; i < n && in_place; ++i) in_place = rows.rows[i] == rows.rows[0] + i * d;
    const float* d_inputs = rows.rows[0];
    if (!in_place && d > 0) {
      BALLOT_TRY(reserve(n * d, device_id));
      for (std::size_t i = 0; i < n; ++i) {
        BALLOT_TRY(kernels::cuda::cuda_status(
            cudaMemcpyAsync(staged_ + i * d, rows.rows[i], 4 * d, cudaMemcpyDeviceToDevice, cuda_stream), "gather"));
      }
      d_inputs = staged_;
    }
    if (distance_twin) {
      auto report = robust::cuda::distance_rule_on_device(*distance_twin, d_inputs, n, d, d_out, cuda_stream);
      // No cuBLAS to load on this machine (the device itself was checked above): the host rule.
      if (!report.ok() && report.error().code == ErrorCode::kUnavailable) return on_host();
      return report;
    }
    BALLOT_TRY(reserve(0, device_id));
    BALLOT_TRY(robust::cuda::coordinate_wise(twin->rule, twin->f, d_inputs, n, d, d_out, word_, cuda_stream));
    std::uint64_t non_finite = 0;
    BALLOT_TRY(kernels::cuda::cuda_status(cudaMemcpyAsync(&non_finite, word_, 8, cudaMemcpyDeviceToHost, cuda_stream),
                                          "copy to the host"));
    BALLOT_TRY(kernels::cuda::cuda_status(cudaStreamSynchronize(cuda_stream), "aggregate"));
    robust::AggregationReport report;
    for (std::size_t i = 0; i < n; ++i) {
      if ((non_finite >> i) & 1u) report.non_finite.push_back(i);
    }
    // As the CPU rules: every input non-finite is their precondition error.
    if (report.non_finite.size() == n) return make_error(ErrorCode::kPrecondition, "every input is non-finite");
    report.excluded = report.non_finite;
    return report;
#else
    (void)rows;
    (void)device_id;
    (void)d_out;
    (void)stream;
    return make_error(ErrorCode::kInvalidArgument,
                      "vectors: this build has no CUDA (ballot.has_cuda is False); move the tensors with .cpu()");
#endif
  }

#if BALLOT_HAVE_CUDA
  // The device word for the non-finite rows, and room for `floats` staged floats, on device_id.
  Status reserve(std::size_t floats, int device_id) {
    if (buffers_device_ != device_id) {
      if (staged_ != nullptr) cudaFree(staged_);
      if (word_ != nullptr) cudaFree(word_);
      staged_ = nullptr;
      word_ = nullptr;
      staged_floats_ = 0;
      buffers_device_ = device_id;
    }
    if (word_ == nullptr)
      BALLOT_TRY(kernels::cuda::cuda_status(cudaMalloc(reinterpret_cast<void**>(&word_), 8), "cudaMalloc"));
    if (floats > staged_floats_) {
      if (staged_ != nullptr) BALLOT_TRY(kernels::cuda::cuda_status(cudaFree(staged_), "cudaFree"));
      staged_ = nullptr;
      staged_floats_ = 0;
      BALLOT_TRY(kernels::cuda::cuda_status(cudaMalloc(reinterpret_cast<void**>(&staged_), 4 * floats), "cudaMalloc"));
      staged_floats_ = floats;
    }
    return {};
  }
  float* staged_ = nullptr;
  std::size_t staged_floats_ = 0;
  std::uint64_t* word_ = nullptr;
  int buffers_device_ = -1;
#endif
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

  // CPU rows in place; CUDA rows (stream: torch's current one on their device) are copied to the
  // host first. The output is a numpy array (the Python layer moves it to the vectors' device).
  nb::tuple apply(nb::handle vectors, std::uintptr_t stream) {
    FloatRows rows = float_rows(vectors, "vectors");
    if (rows.rows.empty()) throw nb::value_error("vectors: at least one vector is needed");
    Result<robust::PreAggregation> result = make_error(ErrorCode::kInternal, "not run");
    {
      nb::gil_scoped_release released;
      const std::lock_guard lock(mutex_);
      result = run(rows, stream);
    }
    robust::PreAggregation out = unwrap(std::move(result));
    using Values = decltype(out.output.values);
    auto* owned = new Values(std::move(out.output.values));
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Values*>(p); });
    nb::ndarray<nb::numpy, float, nb::ndim<2>> matrix(owned->data(), {out.output.n, out.output.d}, owner);
    return nb::make_tuple(matrix, nb::cast(out.non_finite));
  }

 private:
  // Under mutex_, without the GIL.
  Result<robust::PreAggregation> run(const FloatRows& rows, std::uintptr_t stream) {
    std::vector<float> host;
    std::vector<std::span<const float>> spans;
    if (rows.device == Device::kCpu) {
      for (const float* row : rows.rows) spans.emplace_back(row, rows.d);
    } else {
      BALLOT_ASSIGN_OR_RETURN(host, rows_to_host(rows, stream));
      spans = spans_of(host, rows.rows.size(), rows.d);
    }
    BALLOT_ASSIGN_OR_RETURN(const robust::InputMatrix inputs,
                            robust::InputMatrix::from_rows(std::span<const std::span<const float>>(spans)));
    return stage_->apply(inputs);
  }

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
      .def("apply", &NativePreAggregator::apply, nb::arg("vectors"), nb::arg("stream") = 0);
  nb::class_<NativeAggregator>(m, "Aggregator")
      .def(nb::init<const std::string&>(), nb::arg("spec"))
      .def_prop_ro("spec", &NativeAggregator::spec)
      .def("check", &NativeAggregator::check, nb::arg("n"))
      .def("set_center", &NativeAggregator::set_center, nb::arg("center").none())
      .def("aggregate", &NativeAggregator::aggregate, nb::arg("vectors"), nb::arg("stream") = 0)
      .def("aggregate_into", &NativeAggregator::aggregate_into, nb::arg("vectors"), nb::arg("out"), nb::arg("stream"))
      .def("time_aggregate", &NativeAggregator::time_aggregate, nb::arg("vectors"), nb::arg("repeats"));
  m.def("rule_names", &robust::rule_names);
  m.def("pre_aggregator_names", &robust::pre_aggregator_names);
}

}  // namespace ballot::python
