// Codec benchmarks, all in one run so that the ratios compare like with like:
//   (a) read bandwidth of one core, over 1 GiB (DRAM) and over 64 MiB (the size of the input at
//       d = 2^24, which the last-level cache of this VM may partly hold),
//   (b) encode and decode_add of every codec at d = 2^24 (normal random gradient, 64 MiB of
//       floats), as bytes of float input per second and as a fraction of (a),
//   (c) a compression-ratio table (fp32 bytes / wire bytes, bits per coordinate).
// On a shared machine wall time includes other processes' time slices, so the summary also gives
// every rate by CPU time against a read probe timed by CPU time (both in the same run).
//   (d) the random stream alone: the Philox draws QSGD and TernGrad round with (16 bits per
//       coordinate), generated as the encoders do and folded, nothing else. With the norm (max)
//       pass, which must read the whole input before any coordinate is rounded, it gives their
//       floor: one read plus the stream.
//   (e) the aggregator side of global top-k: keep_global_top_k (ratio 0.01) over an aggregate with
//       1 %, 2 % or all of its coordinates nonzero (about k entries, as the mean of one message or
//       of identical ones; two disjoint ones; a dense rule output). The dense floor is one read
//       and one write of the aggregate (50 % of the read bandwidth); a mostly-zero one needs only
//       the read.
// A summary with the targets is printed at the end. Single-threaded throughout.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/read_probe.h"
#include "coding/codec_registry.h"
#include "coding/detail/rounding.h"
#include "coding/global_topk.h"
#include "core/aligned_allocator.h"
#include "core/rng.h"

namespace {

using ballot::AlignedVector;
using ballot::GradientLayout;
using ballot::Rng;

constexpr std::size_t kD = std::size_t{1} << 24;
double g_read_bandwidth = 0;         // bytes per second over 1 GiB (bench/read_probe.h)
double g_cached_read_bandwidth = 0;  // bytes per second over 64 MiB
double g_cpu_read_bandwidth = 0;     // over 1 GiB, by the thread's CPU time

const std::vector<float>& gradient() {
  static const std::vector<float> g = [] {
    Rng rng(1);
    std::vector<float> values(kD);
    for (auto& v : values) v = static_cast<float>(rng.normal());
    return values;
  }();
  return g;
}

// 20 layers of unequal sizes, for the per-layer variants.
const GradientLayout& layered() {
  static const GradientLayout layout = [] {
    GradientLayout l;
    std::size_t left = kD;
    for (int i = 0; i < 19; ++i) {
      const std::size_t size = kD / 40 + static_cast<std::size_t>(i) * 1000;
      l.add_layer("layer" + std::to_string(i), size);
      left -= size;
    }
    l.add_layer("layer19", left);
    return l;
  }();
  return layout;
}
const GradientLayout& whole() {
  static const GradientLayout layout = GradientLayout::whole(kD);
  return layout;
}

struct Case {
  std::string spec;
  bool layered;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> list{{"fp32", false},
                                      {"fp16", false},
                                      {"bf16", false},
                                      {"sign", false},
                                      {"scaled_sign", true},
                                      {"scaled_sign:ef=1", true},
                                      {"signum", false},
                                      {"onebit", true},
                                      {"topk:ratio=0.01", false},
                                      {"topk:ratio=0.001", false},
                                      {"topk:ratio=0.01,granularity=layer", true},
                                      {"randomk:ratio=0.01", false},
                                      {"gtopk:ratio=0.01", false},
                                      {"threshold:tau=2.5", false},
                                      {"qsgd:s=16", false},
                                      {"qsgd:s=16,granularity=layer", true},
                                      {"qsgd:s=4,elias=1", false},
                                      {"terngrad", true},
                                      {"terngrad:clip=2.5", true},
                                      {"dgc:ratio=0.001", true},
                                      {"dgc:ratio=0.01,granularity=model", false}};
  // Every codec of the table is measured: one with no case above runs at its example.
  static const std::vector<Case> all = [] {
    std::vector<Case> out = list;
    for (const auto& entry : ballot::coding::codec_table()) {
      const bool covered = std::any_of(out.begin(), out.end(), [&entry](const Case& c) {
        return ballot::Spec::parse(c.spec).value().name() == entry.name;
      });
      if (covered) continue;
      const auto codec = ballot::coding::make_codec(entry.example).value();
      out.push_back({std::string(entry.example), codec->granularity() == ballot::coding::Granularity::kLayer});
    }
    return out;
  }();
  return all;
}

std::map<std::string, std::size_t> g_wire_bytes;

void set_rates(benchmark::State& state) {
  const double bytes = 4.0 * kD * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["of_read_bw"] = benchmark::Counter(bytes / g_read_bandwidth, benchmark::Counter::kIsRate);
}

void BM_Encode(benchmark::State& state, const Case& c) {
  auto codec = ballot::coding::make_codec(c.spec).value();
  const auto& layout = c.layered ? layered() : whole();
  Rng rng(3);
  // One untimed round first: stateful codecs (error feedback, Signum, gtopk) allocate their d-float
  // state on the first call; the steady state of a training run is what is measured.
  std::size_t bytes = codec->encode(gradient(), layout, rng).size();
  for (auto _ : state) {
    auto encoded = codec->encode(gradient(), layout, rng);
    bytes = encoded.size();
    benchmark::DoNotOptimize(encoded.bytes.data());
  }
  g_wire_bytes[c.spec] = bytes;
  set_rates(state);
}

void BM_Decode(benchmark::State& state, const Case& c) {
  auto codec = ballot::coding::make_codec(c.spec).value();
  const auto& layout = c.layered ? layered() : whole();
  Rng rng(3);
  const auto encoded = codec->encode(gradient(), layout, rng);
  std::vector<float> acc(kD, 0.0f);
  for (auto _ : state) {
    if (!codec->decode_add(encoded.bytes, layout, acc, 1.0f).ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(acc.data());
  }
  set_rates(state);  // decoded floats written per second, same unit as encode
}

void BM_KeepGlobalTopK(benchmark::State& state, double nonzero) {
  std::vector<float> aggregate(gradient().begin(), gradient().end());
  if (nonzero < 1.0) {
    Rng rng(5);
    for (auto& v : aggregate) {
      if (rng.uniform_float() >= nonzero) v = 0.0f;
    }
  }
  std::vector<float> x(kD);
  const ballot::coding::SparseOptions budget{.ratio = 0.01};
  for (auto _ : state) {
    state.PauseTiming();
    std::copy(aggregate.begin(), aggregate.end(), x.begin());
    state.ResumeTiming();
    ballot::coding::keep_global_top_k(x, whole(), budget);
    benchmark::DoNotOptimize(x.data());
  }
  set_rates(state);  // aggregate floats per second
}

void BM_RoundingStream(benchmark::State& state) {
  const ballot::coding::detail::RoundingStream random(3, 0, 0);
  for (auto _ : state) benchmark::DoNotOptimize(ballot::coding::detail::fold_rounding_blocks(random, kD));
  set_rates(state);  // coordinates' worth of float input per second
}

class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.error_occurred) continue;
      rates_[run.run_name.function_name] =
          run.counters.count("bytes_per_second") ? static_cast<double>(run.counters.at("bytes_per_second")) : 0.0;
      const double cpu_seconds_per_call = run.cpu_accumulated_time / static_cast<double>(run.iterations);
      cpu_rates_[run.run_name.function_name] = cpu_seconds_per_call > 0 ? 4.0 * kD / cpu_seconds_per_call : 0.0;
    }
  }
  double rate(const std::string& name) const {
    auto it = rates_.find(name);
    return it == rates_.end() ? 0 : it->second;
  }
  double cpu_rate(const std::string& name) const {
    auto it = cpu_rates_.find(name);
    return it == cpu_rates_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, double> rates_;
  std::map<std::string, double> cpu_rates_;
};

const char* target_of(const std::string& spec) {
  if (spec == "sign" || spec == "scaled_sign" || spec == "qsgd:s=16" || spec == "terngrad") return ">= 50%";
  if (spec == "topk:ratio=0.01") return ">= 20%";
  return "-";
}
double target_value(const std::string& spec) {
  const std::string t = target_of(spec);
  return t == ">= 50%" ? 0.5 : t == ">= 20%" ? 0.2 : 0.0;
}

void print_summary(const SummaryReporter& report) {
  std::printf(
      "\nRead bandwidth of one core: %.2f GB/s over 1 GiB, %.2f GB/s over 64 MiB (wall time); "
      "%.2f GB/s over 1 GiB by CPU time. d = 2^24.\n",
      g_read_bandwidth / 1e9, g_cached_read_bandwidth / 1e9, g_cpu_read_bandwidth / 1e9);
  std::printf("%-36s %9s %9s %8s %8s %9s %9s %7s %5s\n", "codec", "enc GB/s", "dec GB/s", "enc/bw", "dec/bw",
              "enc/64MiB", "wire MiB", "ratio", "bits");
  for (const auto& c : cases()) {
    const double enc = report.rate("encode/" + c.spec);
    const double dec = report.rate("decode/" + c.spec);
    const double wire = static_cast<double>(g_wire_bytes[c.spec]);
    std::printf("%-36s %9.2f %9.2f %7.0f%% %7.0f%% %8.0f%% %9.3f %7.1f %5.2f\n",
                (c.spec + (c.layered ? " [20 layers]" : "")).c_str(), enc / 1e9, dec / 1e9,
                100 * enc / g_read_bandwidth, 100 * dec / g_read_bandwidth, 100 * enc / g_cached_read_bandwidth,
                wire / (1 << 20), 4.0 * kD / wire, 8 * wire / kD);
  }
  std::printf("\nEncode by CPU time (GB/s, fraction of the CPU-time 1 GiB probe):\n");
  for (const auto& c : cases()) {
    const double cpu = report.cpu_rate("encode/" + c.spec);
    std::printf("  %-44s %6.2f %6.0f%%\n", c.spec.c_str(), cpu / 1e9, 100 * cpu / g_cpu_read_bandwidth);
  }
  std::printf("\nTargets (encode, fraction of the 1 GiB read bandwidth; wall / CPU time):\n");
  for (const auto& c : cases()) {
    if (target_value(c.spec) == 0) continue;
    const double fraction = report.rate("encode/" + c.spec) / g_read_bandwidth;
    const double cpu_fraction = report.cpu_rate("encode/" + c.spec) / g_cpu_read_bandwidth;
    std::printf("  %-24s %5.0f%% / %5.0f%%  target %s  %s / %s\n", c.spec.c_str(), 100 * fraction, 100 * cpu_fraction,
                target_of(c.spec), fraction >= target_value(c.spec) ? "met" : "NOT met",
                cpu_fraction >= target_value(c.spec) ? "met" : "NOT met");
  }
  // Floor of the stochastic quantisers: one read of the input (the norm or max pass, which must
  // end before any coordinate is rounded) plus the random stream. The Philox rounds are bound by
  // the vector units' throughput (as fast with 2 interleaved 8-block states as with 8), and the
  // rounding and bit packing need the same units, so the second pass takes at least the stream.
  const double stream = report.rate("rounding_stream");
  if (stream > 0) {
    const double floor_seconds = 4.0 * kD / g_read_bandwidth + 4.0 * kD / stream;
    const double floor_rate = 4.0 * kD / floor_seconds;
    std::printf(
        "\nRandom stream alone (Philox4x32-10, 16 bits per coordinate): %.2f ms for 2^24 coordinates "
        "= %.2f reads of the input.\n",
        1e3 * 4.0 * kD / stream, g_read_bandwidth / stream);
    std::printf(
        "Floor of QSGD / TernGrad encode = one read + the stream (before any rounding or packing): "
        "%.1f%% of the read bandwidth.\n",
        100 * floor_rate / g_read_bandwidth);
    for (const char* spec : {"qsgd:s=16", "terngrad"}) {
      const double rate = report.rate(std::string("encode/") + spec);
      std::printf("  %-24s %5.0f%% of the read bandwidth = %3.0f%% of its floor\n", spec, 100 * rate / g_read_bandwidth,
                  100 * rate / floor_rate);
    }
    // The same by CPU time (against the CPU-time probe), for runs on a shared machine.
    const double cpu_stream = report.cpu_rate("rounding_stream");
    if (cpu_stream > 0) {
      const double cpu_floor_rate = 4.0 * kD / (4.0 * kD / g_cpu_read_bandwidth + 4.0 * kD / cpu_stream);
      std::printf(
          "By CPU time: floor %.1f%% of the CPU-time read bandwidth; qsgd:s=16 %.0f%%, terngrad %.0f%% "
          "of their floor\n",
          100 * cpu_floor_rate / g_cpu_read_bandwidth, 100 * report.cpu_rate("encode/qsgd:s=16") / cpu_floor_rate,
          100 * report.cpu_rate("encode/terngrad") / cpu_floor_rate);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  g_read_bandwidth = ballot::bench::read_bandwidth(ballot::bench::kDramProbeBytes, 5);
  g_cached_read_bandwidth = ballot::bench::read_bandwidth(ballot::bench::kCacheProbeBytes, 40);
  g_cpu_read_bandwidth = ballot::bench::read_bandwidth(ballot::bench::kDramProbeBytes, 5, /*cpu_time=*/true);
  (void)gradient();
  for (const auto& c : cases()) {
    benchmark::RegisterBenchmark(("encode/" + c.spec).c_str(), BM_Encode, c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.5);
    benchmark::RegisterBenchmark(("decode/" + c.spec).c_str(), BM_Decode, c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.5);
  }
  for (const double nonzero : {0.01, 0.02, 1.0}) {
    benchmark::RegisterBenchmark(
        ("keep_global_top_k/nonzero=" + std::to_string(std::lround(100 * nonzero)) + "%").c_str(), BM_KeepGlobalTopK,
        nonzero)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(0.5);
  }
  benchmark::RegisterBenchmark("rounding_stream", BM_RoundingStream)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->MinTime(0.5);
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_summary(reporter);
  benchmark::Shutdown();
  return 0;
}
