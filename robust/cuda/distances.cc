// Host side of the distance rules (distances.h): cuBLAS, the CPU's choice, the value's kernel.
//
// cuBLAS is loaded when first needed (dlopen), not linked: its libraries are ~600 MB that every
// `import ballot` and every program linking robust_cuda would otherwise map, GPU or not, and a
// machine without them still runs everything else (these functions then report kUnavailable).
#include "robust/cuda/distances.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/detail/device_buffer.h"
#include "robust/cuda/detail/launch.h"
#include "robust/detail/common.h"
#include "robust/krum.h"

namespace ballot::robust::cuda {
namespace {

using kernels::cuda::cuda_status;
using kernels::cuda::require_device;
using kernels::cuda::detail::StreamBuffer;

// The cuBLAS entry points used here, resolved from the shared library once.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemmStridedBatched_64) sgemm_strided_batched = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  std::string error;  // why it could not be loaded (empty: loaded)
};

const Cublas& cublas() {
  static const Cublas api = [] {
    Cublas c;
    // By its name (the loader's path, or a copy already loaded, e.g. by torch), then beside the
    // CUDA runtime this process uses (a toolkit's lib directory need not be on the loader's path).
    const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);  // the headers' major version
    std::vector<std::string> names{soname};
    Dl_info runtime{};
    if (dladdr(reinterpret_cast<void*>(&cudaGetDevice), &runtime) != 0 && runtime.dli_fname != nullptr) {
      const std::string path = runtime.dli_fname;
      if (const auto slash = path.rfind('/'); slash != std::string::npos)
        names.push_back(path.substr(0, slash + 1) + soname);
    }
    void* library = nullptr;
    std::string why;  // each attempt's reason
    for (const auto& name : names) {
      library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (library != nullptr) break;
      const char* reason = dlerror();
      why += (why.empty() ? "" : "; ") + std::string(reason != nullptr ? reason : name + ": not found");
    }
    if (library == nullptr) {
      c.error = "cuBLAS (" + soname + ") could not be loaded: " + why;
      return c;
    }
    auto resolve = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, symbol));
      if (fn == nullptr && c.error.empty()) c.error = std::string("cuBLAS has no ") + symbol;
    };
    resolve(c.create, "cublasCreate_v2");
    resolve(c.set_stream, "cublasSetStream_v2");
    resolve(c.set_math_mode, "cublasSetMathMode");
    resolve(c.sgemm_strided_batched, "cublasSgemmStridedBatched_64");
    resolve(c.status_string, "cublasGetStatusString");
    return c;
  }();
  return api;
}

Status blas_status(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return {};
  return make_error(ErrorCode::kInternal, std::string(what) + ": " + cublas().status_string(status));
}

// cuBLAS handles of the current device, in plain fp32 (no TF32 tensor-core rounding), lent one
// call at a time: a handle is created once and never destroyed (destroying one synchronises the
// whole device, and creating one per call would cost its set-up each time), and a pool shared by
// all threads keeps their number at the most calls that ever ran at once, also for short-lived
// threads. A lent handle is bound to the call's stream; giving it back first waits for that stream,
// so that no other call's stream reuses its workspace while an SGEMM queued on an error path may
// still run.
class LentHandle {
 public:
  static Result<LentHandle> borrow(cudaStream_t stream) {
    const Cublas& api = cublas();
    if (!api.error.empty()) return make_error(ErrorCode::kUnavailable, api.error);
    int device = 0;
    BALLOT_TRY(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
    cublasHandle_t handle = nullptr;
    {
      const std::lock_guard lock(pool_mutex());
      auto& idle = pool()[device];
      if (!idle.empty()) {
        handle = idle.back();
        idle.pop_back();
      }
    }
    if (handle == nullptr) {
      BALLOT_TRY(blas_status(api.create(&handle), "cublasCreate"));
      // A handle whose math mode could not be set never enters the pool (left, as all are).
      BALLOT_TRY(blas_status(api.set_math_mode(handle, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode"));
    }
    LentHandle lent(device, handle, stream);  // back to the pool even if binding the stream fails
    BALLOT_TRY(blas_status(api.set_stream(handle, stream), "cublasSetStream"));
    return lent;
  }
  LentHandle(LentHandle&& other) noexcept
      : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)), stream_(other.stream_) {}
  LentHandle& operator=(LentHandle&&) = delete;
  LentHandle(const LentHandle&) = delete;
  ~LentHandle() {
    if (handle_ == nullptr) return;
    (void)cudaStreamSynchronize(stream_);
    const std::lock_guard lock(pool_mutex());
    pool()[device_].push_back(handle_);
  }
  cublasHandle_t get() const { return handle_; }

 private:
  LentHandle(int device, cublasHandle_t handle, cudaStream_t stream)
      : device_(device), handle_(handle), stream_(stream) {}
  static std::mutex& pool_mutex() {
    static std::mutex mutex;
    return mutex;
  }
  static std::map<int, std::vector<cublasHandle_t>>& pool() {
    static auto* idle = new std::map<int, std::vector<cublasHandle_t>>();  // never destroyed, as the handles
    return *idle;
  }

  int device_;
  cublasHandle_t handle_;
  cudaStream_t stream_;
};

// Blocks [first, first + count) of `width` ≤ kGramColumns columns, kGramColumns apart:
// C_b = A_bᵀ·A_b, A_b the width×n column-major view of the rows (leading dimension d) starting at
// column (first + b)·kGramColumns.
Status gram_blocks(cublasHandle_t blas, const float* d_inputs, std::size_t n, std::size_t d, std::size_t first,
                   std::size_t count, std::size_t width, float* d_blocks) {
  const float one = 1.0f, zero = 0.0f;
  const auto nn = static_cast<std::int64_t>(n);
  const auto ld = static_cast<std::int64_t>(d);
  const auto step = static_cast<long long>(kGramColumns);
  const float* a = d_inputs + first * kGramColumns;
  return blas_status(
      cublas().sgemm_strided_batched(blas, CUBLAS_OP_T, CUBLAS_OP_N, nn, nn, static_cast<std::int64_t>(width), &one, a,
                                     ld, step, a, ld, step, &zero, d_blocks, nn, static_cast<long long>(n * n),
                                     static_cast<std::int64_t>(count)),
      "cublasSgemmStridedBatched");
}

Status check_arguments(const float* d_inputs, std::size_t n, std::size_t d) {
  if (n == 0) return make_error(ErrorCode::kPrecondition, "at least one input is needed");
  if (n > (std::size_t{1} << 24)) return make_error(ErrorCode::kInvalidArgument, "more than 2^24 inputs");
  if (d != 0 && d_inputs == nullptr) return make_error(ErrorCode::kInvalidArgument, "the inputs are null");
  if (d > std::numeric_limits<std::size_t>::max() / sizeof(float) / n)
    return make_error(ErrorCode::kInvalidArgument, "n·d floats overflow the address space");
  return {};
}

}  // namespace

std::optional<DistanceRule> distance_rule(const Aggregator& aggregator) noexcept {
  if (const auto* krum = dynamic_cast<const Krum*>(&aggregator)) return DistanceRule{krum->options().f, 1, false};
  if (const auto* multi = dynamic_cast<const MultiKrum*>(&aggregator)) {
    return DistanceRule{multi->options().f, multi->options().m, true};
  }
  return std::nullopt;
}

Result<std::size_t> chosen_count(const DistanceRule& rule, std::size_t n) {
  if (!rule.multi) {
    BALLOT_TRY(Krum::check(n, rule.f));
    return std::size_t{1};
  }
  BALLOT_TRY(MultiKrum::check(n, rule.f, rule.m));
  return rule.m == 0 ? n - rule.f : rule.m;
}

Result<std::vector<double>> gram_on_device(const float* d_inputs, std::size_t n, std::size_t d, void* stream,
                                           std::size_t scratch_floats) {
  BALLOT_TRY(check_arguments(d_inputs, n, d));
  const auto s = static_cast<cudaStream_t>(stream);
  std::vector<double> gram(n * n, 0.0);
  if (d == 0) return gram;
  BALLOT_ASSIGN_OR_RETURN(LentHandle blas, LentHandle::borrow(s));
  const std::size_t whole = d / kGramColumns, tail = d % kGramColumns;
  const std::size_t per_call = std::max<std::size_t>(1, std::min(whole, scratch_floats / (n * n)));
  StreamBuffer<float> d_blocks(per_call * n * n, s);
  StreamBuffer<double> d_partial(ballot_robust_cuda_gram_max_chunks(per_call) * n * n, s);
  StreamBuffer<double> d_gram(n * n, s);
  BALLOT_TRY(d_blocks.status());
  BALLOT_TRY(d_partial.status());
  BALLOT_TRY(d_gram.status());
  BALLOT_TRY(cuda_status(cudaMemsetAsync(d_gram.get(), 0, n * n * sizeof(double), s), "clear the Gram matrix"));
  // Whole blocks in calls of at most per_call, then the tail block alone, each call's sums added
  // to the Gram matrix in turn.
  for (std::size_t first = 0; first < whole; first += per_call) {
    const std::size_t count = std::min(per_call, whole - first);
    BALLOT_TRY(gram_blocks(blas.get(), d_inputs, n, d, first, count, kGramColumns, d_blocks.get()));
    BALLOT_TRY(
        cuda_status(ballot_robust_cuda_sum_gram_blocks(d_blocks.get(), n, count, d_partial.get(), d_gram.get(), stream),
                    "Gram block sums"));
  }
  if (tail != 0) {
    BALLOT_TRY(gram_blocks(blas.get(), d_inputs, n, d, whole, 1, tail, d_blocks.get()));
    BALLOT_TRY(
        cuda_status(ballot_robust_cuda_sum_gram_blocks(d_blocks.get(), n, 1, d_partial.get(), d_gram.get(), stream),
                    "Gram block sums"));
  }
  BALLOT_TRY(cuda_status(cudaMemcpyAsync(gram.data(), d_gram.get(), n * n * sizeof(double), cudaMemcpyDeviceToHost, s),
                         "copy the Gram matrix to the host"));
  BALLOT_TRY(cuda_status(cudaStreamSynchronize(s), "Gram matrix"));
  return gram;
}

Result<AggregationReport> distance_rule_on_device(const DistanceRule& rule, const float* d_inputs, std::size_t n,
                                                  std::size_t d, float* d_out, void* stream) {
  BALLOT_ASSIGN_OR_RETURN(const std::size_t m, chosen_count(rule, n));
  BALLOT_TRY(check_arguments(d_inputs, n, d));
  if (d != 0 && d_out == nullptr) return make_error(ErrorCode::kInvalidArgument, "the output is null");
  const auto s = static_cast<cudaStream_t>(stream);
  BALLOT_ASSIGN_OR_RETURN(auto gram, gram_on_device(d_inputs, n, d, stream));
  // Rows whose squared norm is not finite: non-finite values, or finite ones that overflow. Each
  // scan is waited for before the next (its flag is read on the host).
  std::optional<StreamBuffer<int>> d_flag;
  Status scan;
  auto has_non_finite = [&](std::size_t i) {
    if (!scan.ok()) return false;
    if (!d_flag) {
      d_flag.emplace(1, s);
      scan = d_flag->status();
      if (!scan.ok()) return false;
    }
    int flag = 0;
    scan =
        cuda_status(ballot_robust_cuda_row_non_finite(d_inputs + i * d, d, d_flag->get(), stream), "non-finite scan");
    if (scan.ok())
      scan =
          cuda_status(cudaMemcpyAsync(&flag, d_flag->get(), sizeof flag, cudaMemcpyDeviceToHost, s), "non-finite scan");
    if (scan.ok()) scan = cuda_status(cudaStreamSynchronize(s), "non-finite scan");
    return scan.ok() && flag != 0;
  };
  auto distances = detail::distances_from_gram(std::move(gram), n, has_non_finite);
  BALLOT_TRY(scan);
  BALLOT_ASSIGN_OR_RETURN(AggregationReport report,
                          detail::krum_selection(std::move(distances), rule.f, m, rule.multi ? "multi_krum" : "krum"));
  if (d == 0) return report;
  if (report.selected.size() == 1) {
    BALLOT_TRY(cuda_status(
        cudaMemcpyAsync(d_out, d_inputs + report.selected[0] * d, d * sizeof(float), cudaMemcpyDeviceToDevice, s),
        "copy the chosen input"));
    BALLOT_TRY(cuda_status(cudaStreamSynchronize(s), "copy the chosen input"));
    return report;
  }
  // As the CPU's weighted_sum: coefficient float(1.0 / m), the rows in ascending order. The
  // indices go up on the stream (a pageable copy is staged before cudaMemcpyAsync returns, so
  // `rows` may go), and the stream is synchronised before their buffer is given back.
  const std::vector<std::uint32_t> rows(report.selected.begin(), report.selected.end());
  StreamBuffer<std::uint32_t> d_rows(rows.size(), s);
  BALLOT_TRY(d_rows.status());
  BALLOT_TRY(cuda_status(
      cudaMemcpyAsync(d_rows.get(), rows.data(), rows.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice, s),
      "upload the chosen indices"));
  const auto c = static_cast<float>(1.0 / static_cast<double>(rows.size()));
  BALLOT_TRY(cuda_status(
      ballot_robust_cuda_scaled_sum_of_rows(d_inputs, d, d_rows.get(), static_cast<int>(rows.size()), c, d_out, stream),
      "mean of the chosen inputs"));
  BALLOT_TRY(cuda_status(cudaStreamSynchronize(s), "mean of the chosen inputs"));
  return report;
}

Result<AggregationResult> distance_rule_on_device(const DistanceRule& rule, const InputMatrix& inputs) {
  const std::size_t n = inputs.n(), d = inputs.d();
  BALLOT_TRY(chosen_count(rule, n));
  BALLOT_TRY(require_device());
  kernels::cuda::detail::DeviceBuffer<float> d_inputs(n * d), d_out(d);
  BALLOT_TRY(d_inputs.status());
  BALLOT_TRY(d_out.status());
  for (std::size_t i = 0; i < n && d > 0; ++i) BALLOT_TRY(d_inputs.upload(inputs.row(i), i * d, d));
  BALLOT_ASSIGN_OR_RETURN(AggregationReport report,
                          distance_rule_on_device(rule, d_inputs.get(), n, d, d_out.get(), nullptr));
  AggregationResult result;
  result.value.resize(d);
  if (d > 0) BALLOT_TRY(d_out.download(result.value.data()));
  result.report = std::move(report);
  return result;
}

}  // namespace ballot::robust::cuda
