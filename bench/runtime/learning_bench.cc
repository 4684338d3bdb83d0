// Speed of the built-in models (learning/models.h), one core:
//   (a) the core's peak float throughput, measured with register-only multiply-add probes for the
//       ISA Eigen is compiled for in this build (the project's flags: no -march, so SSE2) and for
//       AVX2+FMA and AVX-512 (what the hardware could do with a -march build);
//   (b) Eigen GEMMs at the shapes the models run, in GFLOP/s and as a fraction of (a);
//   (c) forward+backward time per batch (32 and 64) for logreg, the MLP and the CNN on
//       Fashion-MNIST-shaped inputs, with the model's GEMM flops per second;
//   (d) the update a replica applies to a vote (sign, heavyball) at d = 11.2 M against one
//       read-and-write pass over the parameters (GB/s of both: the floor is the memory's).
// Results and their reading: bench/runtime/LEARNING_RESULTS.md.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/isa.h"
#include "learning/models.h"
#include "learning/optimizer.h"

namespace {

constexpr long kProbeIterations = 20'000'000;

double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Ten independent accumulators hide the latency of the arithmetic, so the loop runs at the
// throughput of the vector units. Thread CPU time, like the benchmarks' rates, so that other
// processes on a shared machine do not lower the figure. Returns flops per second.
template <typename Body>
double time_probe(Body&& body, double flops) {
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const double start = thread_seconds();
    body();
    best = std::max(best, flops / (thread_seconds() - start));
  }
  return best;
}

// SSE2 has no FMA: 7 chains of multiplies and 7 of adds (independent, so both ports work).
// The products grow to +inf, which costs nothing; a factor below 1 would reach denormals.
double peak_sse2() {
  return time_probe(
      [] {
        __m128 mul[7], add[7], m = _mm_set1_ps(1.0001f), a = _mm_set1_ps(1e-6f);
        for (auto& x : mul) x = _mm_set1_ps(1.0f);
        for (auto& x : add) x = _mm_set1_ps(1.0f);
        for (long i = 0; i < kProbeIterations; ++i) {
          for (int k = 0; k < 7; ++k) {
            mul[k] = _mm_mul_ps(mul[k], m);
            add[k] = _mm_add_ps(add[k], a);
          }
        }
        float out[4];
        __m128 sum = _mm_add_ps(mul[0], add[0]);
        for (int k = 1; k < 7; ++k) sum = _mm_add_ps(sum, _mm_add_ps(mul[k], add[k]));
        _mm_storeu_ps(out, sum);
        benchmark::DoNotOptimize(out[0]);
      },
      kProbeIterations * 14.0 * 4);
}

__attribute__((target("avx2,fma"))) void probe_avx2() {
  __m256 acc[10], m = _mm256_set1_ps(0.999f), a = _mm256_set1_ps(1e-6f);
  for (auto& x : acc) x = _mm256_set1_ps(1.0f);
  for (long i = 0; i < kProbeIterations; ++i) {
    for (auto& x : acc) x = _mm256_fmadd_ps(x, m, a);
  }
  __m256 sum = acc[0];
  for (int k = 1; k < 10; ++k) sum = _mm256_add_ps(sum, acc[k]);
  float out[8];
  _mm256_storeu_ps(out, sum);
  benchmark::DoNotOptimize(out[0]);
}

__attribute__((target("avx512f"))) void probe_avx512() {
  __m512 acc[10], m = _mm512_set1_ps(0.999f), a = _mm512_set1_ps(1e-6f);
  for (auto& x : acc) x = _mm512_set1_ps(1.0f);
  for (long i = 0; i < kProbeIterations; ++i) {
    for (auto& x : acc) x = _mm512_fmadd_ps(x, m, a);
  }
  __m512 sum = acc[0];
  for (int k = 1; k < 10; ++k) sum = _mm512_add_ps(sum, acc[k]);
  float out[16];
  _mm512_storeu_ps(out, sum);
  benchmark::DoNotOptimize(out[0]);
}

double g_peak_build = 0;  // flops/s of the ISA Eigen uses in this build

const char* eigen_isa() {
#if defined(EIGEN_VECTORIZE_AVX512)
  return "AVX-512";
#elif defined(EIGEN_VECTORIZE_AVX2) || defined(EIGEN_VECTORIZE_FMA)
  return "AVX2+FMA";
#elif defined(EIGEN_VECTORIZE_AVX)
  return "AVX";
#elif defined(EIGEN_VECTORIZE_SSE2)
  return "SSE2";
#else
  return "scalar";
#endif
}

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// C(M×N) = A(M×K)·B(K×N), the shapes of the models' products.
void BM_Gemm(benchmark::State& state) {
  const auto m = state.range(0), k = state.range(1), n = state.range(2);
  RowMat a = RowMat::Random(m, k), b = RowMat::Random(k, n), c(m, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  const double flops = 2.0 * static_cast<double>(m * k * n);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["of_peak"] = benchmark::Counter(flops / g_peak_build, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Gemm)
    ->ArgNames({"M", "K", "N"})
    ->Args({64, 784, 128})    // MLP fc1 forward, batch 64
    ->Args({128, 64, 784})    // MLP fc1 dW
    ->Args({12544, 200, 16})  // CNN conv2 forward, batch 64 (64·14·14 positions, 8·5·5 patch)
    ->Args({50176, 25, 8})    // CNN conv1 forward, batch 64 (64·28·28 positions, 5·5 patch)
    ->Args({512, 512, 512});  // a square reference

// GEMM flops of one forward+backward (the products only; im2col, pooling, softmax excluded).
double model_flops(const std::string& spec, double batch) {
  if (spec == "logreg") return batch * 2 * 784 * 10 * 2;  // forward + dW (no input gradient)
  if (spec == "mlp") return batch * 2 * (784 * 128 * 2 + 128 * 10 * 3);
  // cnn c1=8, c2=16, k=5: conv1 784·25·8 (fwd + dW), conv2 196·200·16 (fwd, dW, dcols), fc 784·10·3.
  return batch * 2 * (784.0 * 25 * 8 * 2 + 196.0 * 200 * 16 * 3 + 784.0 * 10 * 3);
}

void BM_ForwardBackward(benchmark::State& state, const std::string& spec) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  auto model = ballot::learning::make_model(spec, ballot::learning::ModelShape{}, 1).value();
  ballot::Rng rng(3);
  std::vector<float> x(batch * 784);
  std::vector<std::uint8_t> y(batch);
  for (auto& v : x) v = rng.uniform_float();
  for (auto& v : y) v = static_cast<std::uint8_t>(rng.uniform_int(10));
  for (auto _ : state) benchmark::DoNotOptimize(model->forward_backward(x, y));
  const double flops = model_flops(spec, static_cast<double>(batch));
  state.counters["examples/s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["of_peak"] = benchmark::Counter(flops / g_peak_build, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["params"] = static_cast<double>(model->parameters().size());
}
BENCHMARK_CAPTURE(BM_ForwardBackward, logreg, std::string("logreg"))
    ->ArgName("batch")
    ->Arg(32)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ForwardBackward, mlp, std::string("mlp"))
    ->ArgName("batch")
    ->Arg(32)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ForwardBackward, cnn, std::string("cnn"))
    ->ArgName("batch")
    ->Arg(32)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond);

// (d) The update every replica applies to a decision, at d = 11.2 M (ResNet-18's size), against
// its floor measured in the same run: one streaming pass that reads and writes the parameters
// (x ← a·x + b, the same 8 bytes per coordinate; the vote adds d/8 bytes). The rule's GB/s over
// the floor's is how close it is to the memory limit. The updates are bit-identical to the
// per-coordinate formula (tests/learning/optimizer_test.cc).
constexpr std::size_t kUpdateDimension = 11'200'000;

// x ← a·x + b in 64-byte vectors (GCC's vector extension), for the best vector unit present: at
// -O2 GCC 12 leaves the plain loop scalar, a floor the memory system is not the limit of.
__attribute__((target_clones("avx512f", "avx2", "default"))) void scale_shift(float* x, std::size_t count, float a,
                                                                              float b) {
  using Lane = float __attribute__((vector_size(64)));
  constexpr std::size_t kLanes = sizeof(Lane) / sizeof(float);
  std::size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    Lane v;
    std::memcpy(&v, x + i, sizeof v);
    v = a * v + b;
    std::memcpy(x + i, &v, sizeof v);
  }
  for (; i < count; ++i) x[i] = a * x[i] + b;
}

void BM_UpdateFloor(benchmark::State& state) {
  std::vector<float> x(kUpdateDimension, 0.5f);
  const float a = 0.999f, b = 1e-7f;
  for (auto _ : state) {
    scale_shift(x.data(), x.size(), a, b);
    benchmark::DoNotOptimize(x.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] =
      benchmark::Counter(8.0 * kUpdateDimension * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_UpdateFloor)->Unit(benchmark::kMillisecond)->UseRealTime();

// bytes_per_coordinate: what the rule must move — the parameters read and written (8), a momentum
// buffer read and written (8 more for heavyball), and the vote's bit (1/8).
void BM_UpdateVote(benchmark::State& state, const std::string& spec, double bytes_per_coordinate) {
  auto rule = ballot::learning::make_optimizer(spec, ballot::GradientLayout::whole(kUpdateDimension)).value();
  std::vector<float> x(kUpdateDimension, 0.5f);
  ballot::BitVector vote(kUpdateDimension);
  ballot::Rng rng(5);
  for (std::size_t i = 0; i < kUpdateDimension; ++i) vote.set(i, rng.uniform_int(2) == 1);
  const ballot::learning::StepScale scale = rule->scale(1e-3);
  for (auto _ : state) {
    rule->step_vote(x, vote, scale);
    benchmark::DoNotOptimize(x.data());
  }
  state.counters["GB/s"] =
      benchmark::Counter(bytes_per_coordinate * kUpdateDimension * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_UpdateVote, sign, std::string("sign:wd=0.0001"), 8.125)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_UpdateVote, heavyball, std::string("heavyball"), 16.125)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// A worker's vote: Signum's momentum m ← βm + (1−β)g and its signs. It moves 12 bytes per
// coordinate (m read and written, g read) and writes 1/8: against the floor's 8, its GB/s is the
// comparison.
void BM_WorkerMomentum(benchmark::State& state) {
  std::vector<float> gradient(kUpdateDimension);
  ballot::Rng rng(6);
  for (float& g : gradient) g = static_cast<float>(rng.normal());
  ballot::learning::WorkerMomentum momentum(0.9);
  ballot::BitVector signs;
  for (auto _ : state) {
    momentum.update(gradient, signs);
    benchmark::DoNotOptimize(signs.data());
  }
  state.counters["GB/s"] =
      benchmark::Counter(12.125 * kUpdateDimension * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_WorkerMomentum)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const double sse2 = peak_sse2();
  const double avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                          ? time_probe(probe_avx2, kProbeIterations * 10.0 * 8 * 2)
                          : 0.0;
  const double avx512 =
      __builtin_cpu_supports("avx512f") ? time_probe(probe_avx512, kProbeIterations * 10.0 * 16 * 2) : 0.0;
  const std::string isa = eigen_isa();
  // Nominal peak: two vector arithmetic ports per cycle (Intel since Skylake-SP: ports 0 and 1,
  // or 0 and 5 for AVX-512 on parts with two FMA units) at the clock /proc/cpuinfo reports.
  // SSE2 has no FMA: 2 ops × 4 lanes; AVX2: 2 FMA × 8 lanes × 2; AVX-512: 2 FMA × 16 lanes × 2.
  // AMD's Zen 3 and 4 have four FP pipes (two multiply/FMA, two add): SSE2's multiplies and adds
  // start 4 a cycle; Zen 4 runs a 512-bit FMA as two 256-bit halves (the AVX2 rate).
  double mhz = 0;
  if (std::FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[256];
    while (mhz == 0 && std::fgets(line, sizeof line, f)) std::sscanf(line, "cpu MHz : %lf", &mhz);
    std::fclose(f);
  }
  const double hz = mhz * 1e6;
  const bool amd = ballot::kernels::cpu_splits_512_bit_vectors();  // AMD family 19h
  const double nominal_sse2 = hz * (amd ? 16 : 8), nominal_avx2 = hz * 32, nominal_avx512 = hz * (amd ? 32 : 64);
  const double nominal_build = isa == "AVX-512" ? nominal_avx512 : (isa == "AVX2+FMA" ? nominal_avx2 : nominal_sse2);
  const double probe_build = isa == "AVX-512" ? avx512 : (isa == "AVX2+FMA" ? avx2 : sse2);
  // On a shared machine the probes read low; the nominal figure is the honest ceiling.
  g_peak_build = std::max(nominal_build, probe_build);
  std::printf(
      "peak float throughput of one core:\n"
      "  probes (register-only, thread CPU time): SSE2 mul+add %.1f | AVX2 FMA %.1f | AVX-512 FMA %.1f GFLOP/s\n"
      "  nominal at %.0f MHz:                      SSE2 %.1f | AVX2 %.1f | AVX-512 %.1f GFLOP/s\n"
      "  Eigen is compiled for %s in this build: of_peak counters are against %.1f GFLOP/s\n\n",
      sse2 * 1e-9, avx2 * 1e-9, avx512 * 1e-9, mhz, nominal_sse2 * 1e-9, nominal_avx2 * 1e-9, nominal_avx512 * 1e-9,
      isa.c_str(), g_peak_build * 1e-9);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
