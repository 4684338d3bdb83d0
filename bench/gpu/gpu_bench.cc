// GPU benchmarks: every CUDA kernel of kernels/cuda, robust/cuda and coding/cuda as a fraction of the device's
// own memory bandwidth, both measured in the same run:
//   read bandwidth   a kernel that reads 1 GiB once (probes.cu) — the limit of pack, vote and the
//                    coordinate-wise rules, which read far more than they write;
//   copy bandwidth   cudaMemcpyAsync of 1 GiB device to device, counting the bytes read and
//                    written — the limit of unpack, the fused momentum + pack and the updates,
//                    which read and write about as much.
// Times come from CUDA events around each launch (manual time). A summary with the targets is
// printed at the end. Without a CUDA device the program says so and exits 0.
// Run: build/<preset>/bench/gpu/gpu_bench [--benchmark_filter=...]; results in RESULTS.md.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "coding/codec_registry.h"
#include "coding/cuda/codecs_cuda.h"
#include "core/rng.h"
#include "kernels/cuda/cuda_kernels.h"
#include "robust/cuda/distances.h"
#include "robust/cuda/robust_cuda.h"

extern "C" int ballot_bench_launch_read(const void* data, std::size_t bytes, float* sink, unsigned blocks,
                                        void* stream);

namespace {

namespace cuda = ballot::kernels::cuda;

void check(cudaError_t code, const char* what) {
  if (code != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(code));
    std::exit(1);
  }
}
void check(const ballot::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.error().to_string().c_str());
    std::exit(1);
  }
}

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) : count_(count) {
    check(cudaMalloc(reinterpret_cast<void**>(&pointer_), std::max<std::size_t>(count, 1) * sizeof(T)), "cudaMalloc");
  }
  ~DeviceArray() { cudaFree(pointer_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return pointer_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* pointer_ = nullptr;
  std::size_t count_;
};

struct Device {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  unsigned read_blocks = 0;
  double read_bandwidth = 0;  // bytes per second
  double copy_bandwidth = 0;  // bytes read + written per second
  std::string name;
};
Device g_device;

// The fraction of its limit each benchmark reached (mean time), for the summary.
std::map<std::string, double> g_fractions;

// Seconds of one launch, from CUDA events on the benchmark stream.
template <typename Launch>
double time_once(Launch&& launch) {
  check(cudaEventRecord(g_device.start, g_device.stream), "event");
  launch();
  check(cudaEventRecord(g_device.stop, g_device.stream), "event");
  check(cudaEventSynchronize(g_device.stop), "event sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, g_device.start, g_device.stop), "elapsed");
  return ms / 1e3;
}

// Times `launch` (after one warm-up) and reports bytes/s and the fraction of `limit`.
template <typename Launch>
void run(benchmark::State& state, const std::string& label, double bytes, double limit, Launch&& launch) {
  launch();
  double total = 0;
  for (auto _ : state) {
    const double seconds = time_once(launch);
    state.SetIterationTime(seconds);
    total += seconds;
  }
  const double mean = total / static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes * static_cast<double>(state.iterations())));
  state.counters["of_limit"] = bytes / mean / limit;
  g_fractions[label] = bytes / mean / limit;
}

// Random floats in (-0.5, 0.5) and random words, made on the host once per size.
std::vector<float> random_floats(std::size_t count, std::uint64_t seed) {
  ballot::Rng rng(seed);
  std::vector<float> values(count);
  for (auto& v : values) v = rng.uniform_float() - 0.5f;
  return values;
}
template <typename T>
void upload(const DeviceArray<T>& array, const void* host, std::size_t bytes) {
  check(cudaMemcpy(array.get(), host, bytes, cudaMemcpyHostToDevice), "upload");
}
// Fills a device float array with a repeated block of random values (cheap for 2^28 floats).
void fill_random(const DeviceArray<float>& array, std::size_t count, std::uint64_t seed) {
  const std::size_t block = std::min<std::size_t>(count, std::size_t{1} << 22);
  const auto values = random_floats(block, seed);
  for (std::size_t first = 0; first < count; first += block) {
    check(cudaMemcpy(array.get() + first, values.data(), std::min(block, count - first) * sizeof(float),
                     cudaMemcpyHostToDevice),
          "upload");
  }
}
// Random floats without repeats of one magnitude across the array (block b of the repeated random
// block scaled by 1 + b/64): top-k's selection sees the ties of real data, not 2^k-fold copies.
void fill_distinct(const DeviceArray<float>& array, std::size_t count, std::uint64_t seed) {
  const std::size_t block = std::min<std::size_t>(count, std::size_t{1} << 22);
  const auto values = random_floats(block, seed);
  std::vector<float> scaled(block);
  for (std::size_t first = 0, b = 0; first < count; first += block, ++b) {
    const float factor = 1.0f + static_cast<float>(b) / 64.0f;
    for (std::size_t i = 0; i < block; ++i) scaled[i] = values[i] * factor;
    check(cudaMemcpy(array.get() + first, scaled.data(), std::min(block, count - first) * sizeof(float),
                     cudaMemcpyHostToDevice),
          "upload");
  }
}
void fill_random_words(const DeviceArray<std::uint64_t>& array, std::size_t count, std::uint64_t seed) {
  ballot::Rng rng(seed);
  std::vector<std::uint64_t> words(count);
  for (auto& w : words) w = (static_cast<std::uint64_t>(rng.next_u32()) << 32) | rng.next_u32();
  upload(array, words.data(), count * sizeof(std::uint64_t));
}

std::string pow2(std::int64_t d) {
  int k = 0;
  while ((std::int64_t{1} << k) < d) ++k;
  return "2^" + std::to_string(k);
}

void BM_ReadBandwidth(benchmark::State& state) {
  const std::size_t bytes = std::size_t{1} << 30;
  DeviceArray<float> data(bytes / 4), sink(256 * g_device.read_blocks);
  run(state, "read probe", static_cast<double>(bytes), g_device.read_bandwidth,
      [&] { ballot_bench_launch_read(data.get(), bytes, sink.get(), g_device.read_blocks, g_device.stream); });
}

void BM_CopyBandwidth(benchmark::State& state) {
  const std::size_t bytes = std::size_t{1} << 30;
  DeviceArray<std::uint8_t> from(bytes), to(bytes);
  run(state, "copy probe", 2.0 * bytes, g_device.copy_bandwidth,
      [&] { check(cudaMemcpyAsync(to.get(), from.get(), bytes, cudaMemcpyDeviceToDevice, g_device.stream), "copy"); });
}

void BM_Pack(benchmark::State& state) {
  const auto d = static_cast<std::size_t>(state.range(0));
  DeviceArray<float> values(d);
  DeviceArray<std::uint64_t> words((d + 63) / 64);
  fill_random(values, d, 1);
  run(state, "pack d=" + pow2(state.range(0)) + " (of read)", 4.0 * d, g_device.read_bandwidth,
      [&] { check(cuda::pack_signs(values.get(), d, words.get(), g_device.stream)); });
}

void BM_Unpack(benchmark::State& state) {
  const auto d = static_cast<std::size_t>(state.range(0));
  DeviceArray<std::uint64_t> words((d + 63) / 64);
  DeviceArray<float> out(d);
  fill_random_words(words, (d + 63) / 64, 2);
  run(state, "unpack d=" + pow2(state.range(0)) + " (of copy)", d / 8.0 + 4.0 * d, g_device.copy_bandwidth,
      [&] { check(cuda::unpack_signs(words.get(), d, -1.0f, 1.0f, out.get(), g_device.stream)); });
}

void BM_Vote(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto d = static_cast<std::size_t>(state.range(1));
  const std::size_t num_words = (d + 63) / 64;
  DeviceArray<std::uint64_t> inputs(n * num_words), out(num_words);
  fill_random_words(inputs, n * num_words, 3);
  run(state, "vote n=" + std::to_string(n) + " d=" + pow2(state.range(1)) + " (of read)", n * d / 8.0,
      g_device.read_bandwidth,
      [&] { check(cuda::majority_vote(inputs.get(), n, num_words, nullptr, n, out.get(), g_device.stream)); });
}

void BM_MomentumPack(benchmark::State& state) {
  const auto d = static_cast<std::size_t>(state.range(0));
  DeviceArray<float> momentum(d), gradient(d);
  DeviceArray<std::uint64_t> words((d + 63) / 64);
  fill_random(momentum, d, 4);
  fill_random(gradient, d, 5);
  // Reads m and g, writes m and the signs.
  run(state, "momentum+pack d=" + pow2(state.range(0)) + " (of copy)", 12.0 * d + d / 8.0, g_device.copy_bandwidth,
      [&] {
        check(cuda::momentum_pack_signs(momentum.get(), gradient.get(), d, ballot::kernels::momentum_factors(0.9),
                                        words.get(), g_device.stream));
      });
}

// kind 0: sign rule from a vote; 1: heavy ball from a vote; 2: sgd from an fp32 direction.
void BM_Update(benchmark::State& state) {
  const auto d = static_cast<std::size_t>(state.range(0));
  const int kind = static_cast<int>(state.range(1));
  DeviceArray<float> params(d), buffer(kind == 1 ? d : 0), direction(kind == 2 ? d : 0);
  DeviceArray<std::uint64_t> vote(kind == 2 ? 0 : (d + 63) / 64);
  fill_random(params, d, 6);
  if (kind == 1) fill_random(buffer, d, 7);
  if (kind == 2) fill_random(direction, d, 8);
  if (kind != 2) fill_random_words(vote, (d + 63) / 64, 9);
  const ballot::kernels::SgdFactors factors{1e-4f, 1e-4f, kind == 1 ? 0.9f : 0.0f, 1.0f, false};
  const char* names[] = {"sign update", "heavy-ball update", "sgd update (fp32)"};
  const double bytes = kind == 0 ? 8.0 * d + d / 8.0 : kind == 1 ? 16.0 * d + d / 8.0 : 12.0 * d;
  run(state, std::string(names[kind]) + " d=" + pow2(state.range(0)) + " (of copy)", bytes, g_device.copy_bandwidth,
      [&] {
        check(cuda::apply_update(params.get(), kind == 2 ? nullptr : vote.get(), kind == 2 ? direction.get() : nullptr,
                                 kind == 1 ? buffer.get() : nullptr, d, factors, false, g_device.stream));
      });
}

// A coordinate-wise rule over n rows of d floats (robust/cuda), f = (n − 1)/4: one read of n·d
// floats (all finite, so the second pass returns at once). The sorting network's work does not
// depend on the values, so the rows fill_random makes (repeats of one block) time like any others.
void BM_CoordinateRule(benchmark::State& state) {
  const auto rule = static_cast<ballot::robust::cuda::CoordinateRule>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  const auto d = static_cast<std::size_t>(state.range(2));
  const std::size_t f = (n - 1) / 4;
  DeviceArray<float> inputs(n * d), out(d);
  DeviceArray<std::uint64_t> non_finite(1);
  fill_random(inputs, n * d, 10);
  const char* names[] = {"mean", "median", "trimmed mean", "meamed"};
  run(state,
      std::string(names[state.range(0)]) + " n=" + std::to_string(n) + " d=" + pow2(state.range(2)) + " (of read)",
      4.0 * n * d, g_device.read_bandwidth, [&] {
        check(ballot::robust::cuda::coordinate_wise(rule, f, inputs.get(), n, d, out.get(), non_finite.get(),
                                                    g_device.stream));
      });
}

// Krum and multi-Krum (robust/cuda/distances.h) over n rows of d floats, f = (n − 3)/4, from one
// call to the value: the batched SGEMM of the Gram matrix, its block sums, the download, the
// choice on the host and the value's kernel (cuBLAS handle creation included, as a caller pays
// it). The fraction is of one read of the n·d floats; the SGEMM's n²·d multiply-adds (both
// triangles) make it compute-bound above n ≈ 40 on an H100 (67 TFLOP/s fp32 against 3.35 TB/s:
// 20 flop, 10 multiply-adds per byte; the SGEMM does n/4 per byte read), so the read is the limit
// only for small n.
void BM_Krum(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto d = static_cast<std::size_t>(state.range(1));
  const bool multi = state.range(2) != 0;
  const ballot::robust::cuda::DistanceRule rule{(n - 3) / 4, 0, multi};
  DeviceArray<float> inputs(n * d), out(d);
  // Distinct rows (each its own block of random values): a Krum choice without exact ties.
  for (std::size_t i = 0; i < n; ++i) {
    const auto row = random_floats(d, 20 + i);
    check(cudaMemcpy(inputs.get() + i * d, row.data(), d * sizeof(float), cudaMemcpyHostToDevice), "upload");
  }
  run(state,
      std::string(multi ? "multi-krum" : "krum") + " n=" + std::to_string(n) + " d=" + pow2(state.range(1)) +
          " (of read)",
      4.0 * n * d, g_device.read_bandwidth, [&] {
        auto report =
            ballot::robust::cuda::distance_rule_on_device(rule, inputs.get(), n, d, out.get(), g_device.stream);
        if (!report.ok()) check(ballot::Status(report.error()));
      });
}

// A codec's device encoder (coding/cuda) on d floats, model granularity. The fraction is of the read
// bandwidth counting the gradient once (4d bytes); QSGD, TernGrad and scaled sign must read it
// twice (the norm or maximum first, then the quantising or sign pass) and write the streams, so
// their floor is 8d + the message bytes: about 46 % (QSGD), 48 % (TernGrad) and 49 % (scaled
// sign) of the read bandwidth at best. Sign reads it once (97 %); threshold once, plus its
// selection's writes; random-k reads only its k entries (and uploads 4k bytes of indices drawn
// on the host, which bound it).
void BM_Encode(benchmark::State& state, const std::string& spec) {
  const auto d = static_cast<std::size_t>(state.range(0));
  auto codec = ballot::coding::make_codec(spec);
  if (!codec.ok()) check(ballot::Status(codec.error()));
  const auto layout = ballot::GradientLayout::whole(d);
  const std::size_t wire = (*codec)->wire_size(layout);
  DeviceArray<float> gradient(d);
  DeviceArray<std::uint8_t> out(wire);
  fill_distinct(gradient, d, 11);
  ballot::coding::cuda::Workspace workspace;
  ballot::Rng rng(12, 0);
  const std::string name = spec.substr(0, spec.find(':'));
  std::size_t written = 0;
  run(state, name + " encode d=" + pow2(state.range(0)) + " (of read)", 4.0 * d, g_device.read_bandwidth, [&] {
    auto bytes =
        ballot::coding::cuda::encode(**codec, gradient.get(), layout, rng, out.get(), workspace, g_device.stream);
    if (!bytes.ok()) check(ballot::Status(bytes.error()));
    written = *bytes;
  });
  state.counters["message_bytes"] = static_cast<double>(written);
}

// A codec whose state lives on the device (coding/cuda: DeviceStatefulCodec), model granularity,
// the fraction again of one read of 4d bytes. DGC reads g, u and v and writes u and v (20d bytes: 5
// reads' time at best), then selects; global top-k reads g and its residual and writes the
// residual (12d: 3 reads) before the device top-k.
void BM_EncodeWithState(benchmark::State& state, const std::string& spec) {
  const auto d = static_cast<std::size_t>(state.range(0));
  auto codec = ballot::coding::make_codec(spec);
  if (!codec.ok()) check(ballot::Status(codec.error()));
  auto device = ballot::coding::cuda::DeviceStatefulCodec::create(**codec);
  if (!device.ok()) check(ballot::Status(device.error()));
  const auto layout = ballot::GradientLayout::whole(d);
  DeviceArray<float> gradient(d);
  DeviceArray<std::uint8_t> out((*codec)->wire_size(layout));
  fill_distinct(gradient, d, 13);
  ballot::Rng rng(14, 0);
  const std::string name = spec.substr(0, spec.find(':'));
  std::size_t written = 0;
  run(state, name + " encode d=" + pow2(state.range(0)) + " (of read)", 4.0 * d, g_device.read_bandwidth, [&] {
    auto bytes = (*device)->encode(gradient.get(), layout, rng, out.get(), g_device.stream);
    if (!bytes.ok()) check(ballot::Status(bytes.error()));
    written = *bytes;
  });
  state.counters["message_bytes"] = static_cast<double>(written);
}

constexpr std::int64_t k24 = std::int64_t{1} << 24, k26 = std::int64_t{1} << 26, k28 = std::int64_t{1} << 28;

BENCHMARK(BM_ReadBandwidth)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CopyBandwidth)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Pack)->Arg(k24)->Arg(k26)->Arg(k28)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Unpack)->Arg(k26)->Arg(k28)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Vote)->Args({3, k28})->Args({15, k26})->Args({15, k28})->Args({63, k26})->UseManualTime()->Unit(
    benchmark::kMicrosecond);
BENCHMARK(BM_CoordinateRule)->ArgsProduct({{0, 1, 2}, {15, 25}, {k24}})->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Krum)
    ->Args({25, std::int64_t{1} << 22, 0})
    ->Args({100, std::int64_t{1} << 22, 0})
    ->Args({25, std::int64_t{1} << 22, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MomentumPack)->Arg(k26)->Arg(k28)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Encode, qsgd, std::string("qsgd:ef=0,s=16"))
    ->Arg(k26)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// QSGD with Elias coding: three reads of the gradient, and 12 bytes a coordinate of levels and code
// offsets written and read back (a scan): about 9 reads' time at best.
BENCHMARK_CAPTURE(BM_Encode, qsgd_elias, std::string("qsgd:ef=0,s=16,elias=1"))
    ->Arg(k26)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Encode, terngrad, std::string("terngrad:ef=0,granularity=model"))
    ->Arg(k26)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Encode, topk, std::string("topk:ef=0,ratio=0.01"))
    ->Arg(k26)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Encode, sign, std::string("sign"))->Arg(k26)->UseManualTime()->Unit(benchmark::kMicrosecond);
// The cast: one read of 4d bytes and one write of 2d (its limit is 1.5 reads' time).
BENCHMARK_CAPTURE(BM_Encode, fp16, std::string("fp16"))->Arg(k26)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Encode, scaled_sign, std::string("scaled_sign:ef=0,granularity=model"))
    ->Arg(k26)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// 1-bit SGD: both sides' sums and the negatives counted in one read, then the signs (as scaled sign).
BENCHMARK_CAPTURE(BM_Encode, onebit, std::string("onebit:ef=0,granularity=model"))
    ->Arg(k26)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// τ = 0.58 keeps about 1.1 % of fill_distinct's entries (uniform in ±0.5 times 1 … 1.23).
BENCHMARK_CAPTURE(BM_Encode, threshold, std::string("threshold:ef=0,tau=0.58"))
    ->Arg(k26)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Encode, randomk, std::string("randomk:ef=0,ratio=0.01"))
    ->Arg(k26)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_EncodeWithState, dgc, std::string("dgc:ratio=0.001,granularity=model"))
    ->Arg(k26)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_EncodeWithState, gtopk, std::string("gtopk:ratio=0.01"))
    ->Arg(k26)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Update)->Args({k26, 0})->Args({k28, 0})->Args({k26, 1})->Args({k26, 2})->UseManualTime()->Unit(
    benchmark::kMicrosecond);

// The device's read and copy bandwidth: the best of 20 runs of each probe over 1 GiB.
void measure_limits() {
  const std::size_t bytes = std::size_t{1} << 30;
  DeviceArray<std::uint8_t> a(bytes), b(bytes);
  DeviceArray<float> sink(256 * g_device.read_blocks);
  double best_read = 1e9, best_copy = 1e9;
  for (int i = 0; i < 21; ++i) {
    const double read =
        time_once([&] { ballot_bench_launch_read(a.get(), bytes, sink.get(), g_device.read_blocks, g_device.stream); });
    const double copy = time_once(
        [&] { check(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, g_device.stream), "copy"); });
    if (i > 0) best_read = std::min(best_read, read), best_copy = std::min(best_copy, copy);
  }
  g_device.read_bandwidth = bytes / best_read;
  g_device.copy_bandwidth = 2.0 * bytes / best_copy;
}

void print_summary() {
  std::printf("\nSummary on %s: read bandwidth %.0f GB/s, copy bandwidth %.0f GB/s (read + written), 1 GiB each\n",
              g_device.name.c_str(), g_device.read_bandwidth / 1e9, g_device.copy_bandwidth / 1e9);
  std::printf("%-44s %9s %9s %5s\n", "kernel (limit)", "reached", "target", "met");
  const auto target_for = [](const std::string& label) -> double {
    if (label.rfind("vote n=15 d=2^28", 0) == 0) return 0.70;
    if (label.rfind("pack d=2^26", 0) == 0 || label.rfind("pack d=2^28", 0) == 0) return 0.85;
    if (label.rfind("unpack", 0) == 0 || label.find("update") != std::string::npos) return 0.80;
    if (label.rfind("qsgd encode", 0) == 0 || label.rfind("terngrad encode", 0) == 0) return 0.50;
    return 0.0;
  };
  for (const auto& [label, fraction] : g_fractions) {
    const double target = target_for(label);
    if (target > 0) {
      std::printf("%-44s %8.0f%% %8.0f%% %5s\n", label.c_str(), 100 * fraction, 100 * target,
                  fraction >= target ? "yes" : "NO");
    } else {
      std::printf("%-44s %8.0f%% %9s %5s\n", label.c_str(), 100 * fraction, "-", "");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (cuda::device_count() == 0) {
    std::printf("gpu_bench: no CUDA device on this machine; nothing measured.\n");
    return 0;
  }
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, 0), "device properties");
  g_device.name = properties.name;
  g_device.read_blocks = static_cast<unsigned>(properties.multiProcessorCount) * 8;
  check(cudaStreamCreate(&g_device.stream), "stream");
  check(cudaEventCreate(&g_device.start), "event");
  check(cudaEventCreate(&g_device.stop), "event");
  measure_limits();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}
