// Kernel benchmarks, all in one run so that ratios compare like with like:
//   (a) read bandwidth of one core over a buffer far larger than the last-level cache,
//   (b) sign pack at d = 2^24 and 2^26, also as a fraction of (a),
//   (c) majority vote of n in {3, 15, 63} inputs of d = 2^26 coordinates, against the reference
//       that unpacks to integers, sums and repacks (what the signSGD-MV reference code does),
//   (d) the entries of a 1 %-dense float vector at d = 11.2 M (kernels/float_entries.h: what a
//       sparse decision's encoder and the state digest scan), counted and listed, per ISA level,
//       as a fraction of (a).
// A summary table with the targets is printed at the end. Single-threaded throughout.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/read_probe.h"
#include "core/aligned_allocator.h"
#include "core/rng.h"
#include "kernels/float_entries.h"
#include "kernels/isa.h"
#include "kernels/majority_vote.h"
#include "kernels/sign_kernels.h"

namespace {

using ballot::AlignedVector;
using ballot::BitVector;
using ballot::kernels::Isa;

using ballot::bench::kCacheProbeBytes;
using ballot::bench::kDramProbeBytes;
double g_read_bandwidth = 0;         // bytes per second from memory, measured before the benchmarks run
double g_cached_read_bandwidth = 0;  // the same over 64 MiB: the vote of n = 15 at d = 2^26 (120 MiB)
                                     // and the pack at d = 2^24 (64 MiB) can run from a large L3

void set_rates(benchmark::State& state, double bytes_per_iteration) {
  const double bytes = bytes_per_iteration * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  // A rate counter: bytes / read bandwidth / seconds = the fraction of the read bandwidth.
  state.counters["of_read_bw"] = benchmark::Counter(bytes / g_read_bandwidth, benchmark::Counter::kIsRate);
}

void BM_ReadBandwidth(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ballot::bench::read_bandwidth(kDramProbeBytes, 1));
  set_rates(state, kDramProbeBytes);
}

// Cache-line aligned like the probe's buffer (and every BitVector), so both read whole lines.
AlignedVector<float> random_floats(std::size_t count) {
  ballot::Rng rng(1);
  AlignedVector<float> values(count);
  for (auto& v : values) v = rng.uniform_float() - 0.5f;
  return values;
}

void BM_PackSigns(benchmark::State& state) {
  const auto isa = static_cast<Isa>(state.range(1));
  if (!ballot::kernels::isa_supported(isa)) return state.SkipWithError("ISA not supported");
  ballot::kernels::set_isa_limit(isa);
  const auto values = random_floats(static_cast<std::size_t>(state.range(0)));
  BitVector out(values.size());
  for (auto _ : state) {
    ballot::kernels::pack_signs(values, out);
    benchmark::DoNotOptimize(out.data());
  }
  set_rates(state, values.size() * sizeof(float));
  state.SetLabel(std::string(ballot::kernels::isa_name(isa)));
}

std::vector<BitVector> random_votes(std::size_t n, std::size_t d) {
  ballot::Rng rng(2);
  std::vector<BitVector> inputs;
  for (std::size_t i = 0; i < n; ++i) {
    BitVector bits(d);
    for (auto& word : bits.words()) word = rng.next_u64();
    bits.clear_padding();
    inputs.push_back(std::move(bits));
  }
  return inputs;
}

void BM_MajorityVote(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto d = static_cast<std::size_t>(state.range(1));
  const auto isa = static_cast<Isa>(state.range(2));
  if (!ballot::kernels::isa_supported(isa)) return state.SkipWithError("ISA not supported");
  ballot::kernels::set_isa_limit(isa);
  const auto inputs = random_votes(n, d);
  BitVector out(d);
  for (auto _ : state) {
    ballot::kernels::majority_vote(inputs, out);
    benchmark::DoNotOptimize(out.data());
  }
  set_rates(state, n * d / 8.0);
  state.SetLabel(std::string(ballot::kernels::isa_name(isa)));
}

// The baseline, as the reference implementation of signSGD with majority vote does it with
// tensors: unpack every input to ±1 floats, sum them, take the sign (0 -> +1) and pack again. The
// unpack and pack steps use our own vectorised kernels and the sum vectorises, so the baseline is
// the best version of that approach, not a strawman.
void BM_MajorityVoteReference(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto d = static_cast<std::size_t>(state.range(1));
  ballot::kernels::set_isa_limit(Isa::kAvx512);
  const auto inputs = random_votes(n, d);
  AlignedVector<float> sums(d), unpacked(d);
  BitVector out(d);
  for (auto _ : state) {
    std::fill(sums.begin(), sums.end(), 0.0f);
    for (const auto& input : inputs) {
      ballot::kernels::unpack_signs(input, unpacked);
      for (std::size_t c = 0; c < d; ++c) sums[c] += unpacked[c];
    }
    ballot::kernels::pack_signs(sums, out);
    benchmark::DoNotOptimize(out.data());
  }
  set_rates(state, n * d / 8.0);
}

constexpr std::int64_t kPackSizes[] = {std::int64_t{1} << 24, std::int64_t{1} << 26};
constexpr std::int64_t kVoteD = std::int64_t{1} << 26;
constexpr std::int64_t kVoteInputs[] = {3, 15, 63};

// 1 % of d coordinates nonzero, spread uniformly.
const AlignedVector<float>& sparse_floats(std::size_t d) {
  static AlignedVector<float> values;
  if (values.size() != d) {
    ballot::Rng rng(3);
    values.assign(d, 0.0f);
    for (auto& v : values)
      if (rng.bernoulli(0.01)) v = rng.uniform_float() - 0.5f;
  }
  return values;
}

void BM_Entries(benchmark::State& state) {
  const auto isa = static_cast<Isa>(state.range(2));
  if (!ballot::kernels::isa_supported(isa)) return state.SkipWithError("ISA not supported");
  ballot::kernels::set_isa_limit(isa);
  const auto& values = sparse_floats(static_cast<std::size_t>(state.range(0)));
  std::vector<std::uint32_t> out;
  for (auto _ : state) {
    if (state.range(1) == 0) {
      benchmark::DoNotOptimize(ballot::kernels::count_entries(values));
    } else {
      out.clear();
      ballot::kernels::append_entries(values, out);
      benchmark::DoNotOptimize(out.data());
    }
  }
  set_rates(state, values.size() * sizeof(float));
  state.SetLabel(std::string(state.range(1) == 0 ? "count " : "list ") + std::string(ballot::kernels::isa_name(isa)));
}

void register_benchmarks() {
  benchmark::RegisterBenchmark("read_bandwidth/1GiB", BM_ReadBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime();
  for (auto isa : ballot::kernels::supported_isas()) {
    for (auto d : kPackSizes) {
      benchmark::RegisterBenchmark("pack_signs", BM_PackSigns)
          ->Args({d, static_cast<std::int64_t>(isa)})
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  for (auto n : kVoteInputs) {
    for (auto isa : ballot::kernels::supported_isas()) {
      benchmark::RegisterBenchmark("majority_vote", BM_MajorityVote)
          ->Args({n, kVoteD, static_cast<std::int64_t>(isa)})
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    benchmark::RegisterBenchmark("majority_vote_reference", BM_MajorityVoteReference)
        ->Args({n, kVoteD})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(1);
  }
  for (std::int64_t list : {0, 1}) {
    for (auto isa : ballot::kernels::supported_isas()) {
      benchmark::RegisterBenchmark("entries", BM_Entries)
          ->Args({11'200'000, list, static_cast<std::int64_t>(isa)})
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

// Collects every run so that a summary of ratios can be printed after the console output.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.error_occurred) continue;
      seconds_[run.benchmark_name()] = run.GetAdjustedRealTime() / 1e3;  // ms -> s
      rates_[run.benchmark_name()] =
          run.counters.count("bytes_per_second") ? static_cast<double>(run.counters.at("bytes_per_second")) : 0.0;
    }
  }
  double seconds(const std::string& name) const {
    auto it = seconds_.find(name);
    return it == seconds_.end() ? 0 : it->second;
  }
  double rate(const std::string& name) const {
    auto it = rates_.find(name);
    return it == rates_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, double> seconds_, rates_;
};

void print_summary(const SummaryReporter& report) {
  const Isa best = ballot::kernels::supported_isas().back();
  const std::string isa = std::to_string(static_cast<int>(best));
  std::printf(
      "\nSummary (best ISA: %s; read bandwidth of one core: %.2f GB/s over 1 GiB, "
      "%.2f GB/s over 64 MiB)\n",
      std::string(ballot::kernels::isa_name(best)).c_str(), g_read_bandwidth / 1e9, g_cached_read_bandwidth / 1e9);
  std::printf("%-44s %12s %12s %10s\n", "measure", "value", "target", "met");
  for (auto d : kPackSizes) {
    const std::string name = "pack_signs/" + std::to_string(d) + "/" + isa + "/real_time";
    const double fraction = report.rate(name) / g_read_bandwidth;
    const std::string label = "pack d=2^" + std::to_string(__builtin_ctzll(d));
    std::printf("%-44s %11.0f%% %11s %10s\n", (label + " of read bw").c_str(), 100 * fraction, ">= 85%",
                fraction >= 0.85 ? "yes" : "no");
    std::printf("%-44s %11.0f%% %11s %10s\n", (label + " of 64 MiB read bw").c_str(),
                100 * report.rate(name) / g_cached_read_bandwidth, "-", "-");
  }
  for (auto n : kVoteInputs) {
    const std::string fast =
        "majority_vote/" + std::to_string(n) + "/" + std::to_string(kVoteD) + "/" + isa + "/real_time";
    const std::string slow =
        "majority_vote_reference/" + std::to_string(n) + "/" + std::to_string(kVoteD) + "/iterations:1/real_time";
    const double speedup = report.seconds(fast) > 0 ? report.seconds(slow) / report.seconds(fast) : 0;
    const double fraction = report.rate(fast) / g_read_bandwidth;
    const bool target = n == 15;
    std::printf("%-44s %11.1fx %11s %10s\n", ("vote n=" + std::to_string(n) + " speed-up vs reference").c_str(),
                speedup, target ? ">= 30x" : "-", target ? (speedup >= 30 ? "yes" : "no") : "-");
    std::printf("%-44s %11.0f%% %11s %10s\n", ("vote n=" + std::to_string(n) + " input read, of read bw").c_str(),
                100 * fraction, target ? ">= 60%" : "-", target ? (fraction >= 0.6 ? "yes" : "no") : "-");
    std::printf("%-44s %11.0f%% %11s %10s\n", ("vote n=" + std::to_string(n) + " of 64 MiB read bw").c_str(),
                100 * report.rate(fast) / g_cached_read_bandwidth, "-", "-");
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  g_read_bandwidth = ballot::bench::read_bandwidth(kDramProbeBytes, 5);
  g_cached_read_bandwidth = ballot::bench::read_bandwidth(kCacheProbeBytes, 40);
  register_benchmarks();
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_summary(reporter);
  benchmark::Shutdown();
  return 0;
}
