// Robust aggregation benchmarks, all in one run so that ratios compare like with like:
//   (a) read bandwidth of one core over a 1 GiB buffer (the physical limit);
//   (b) for every (n, d): the time to read the n×d input once (a vectorised sum), the baseline of
//       the target "within 4x of the time to read its input once";
//   (c) every rule, pre-aggregator and the sign vote at n in {10, 25, 100}, d in {1e5, 1e6},
//       f = (n − 3) / 4 (the largest f every rule accepts, Bulyan's n ≥ 4f + 3).
//   (d) the pipelines "clipping:tau=1 > mean" and "arc:f > mean", and threads=2 variants of the mean and the three
//       pre-aggregators (their speed-up over threads=1 needs two free cores to mean anything).
// Prints a summary table (time, input GB/s, ratio to the input read, target met, speed-up of the
// threads=2 variants) at the end. Single-threaded except (d). Runs in about 3–4 minutes.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/read_probe.h"
#include "core/aligned_allocator.h"
#include "core/rng.h"
#include "kernels/isa.h"
#include "robust/registry.h"
#include "robust/sign_vote.h"

namespace {

using ballot::AlignedVector;
using ballot::robust::InputMatrix;

constexpr std::size_t kProbeBytes = ballot::bench::kDramProbeBytes;
double g_read_bandwidth = 0;

// The baseline every rule is judged by: one read of its input (bench/read_probe.h).
std::uint64_t read_floats(const float* x, std::size_t count) { return ballot::bench::read_all(x, 4 * count); }

// One input matrix at a time (the largest is 400 MB), uniform in [-1, 1).
const AlignedVector<float>& inputs_for(std::size_t n, std::size_t d) {
  static std::size_t cached_n = 0, cached_d = 0;
  static AlignedVector<float> data;
  if (cached_n != n || cached_d != d) {
    data = AlignedVector<float>();
    data.resize(n * d);
    ballot::Rng rng(n * 1000003 + d);
    for (auto& v : data) v = 2.0f * rng.uniform_float() - 1.0f;
    cached_n = n;
    cached_d = d;
  }
  return data;
}

void set_rates(benchmark::State& state, double bytes) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes * static_cast<double>(state.iterations())));
  state.counters["input_MB"] = bytes / 1e6;
}

void BM_ReadInput(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  const auto& data = inputs_for(n, d);
  for (auto _ : state) benchmark::DoNotOptimize(read_floats(data.data(), data.size()));
  set_rates(state, 4.0 * n * d);
}

// The same read on two threads, each summing half of the rows: what the memory system gives two
// cores at once, the limit of the threads=2 speed-ups of rules that stream their input.
void BM_ReadInputTwoThreads(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  const auto& data = inputs_for(n, d);
  const std::size_t half = (n / 2) * d;
  for (auto _ : state) {
    std::uint64_t other = 0;
    std::thread second([&] { other = read_floats(data.data() + half, data.size() - half); });
    const std::uint64_t first = read_floats(data.data(), half);
    second.join();
    benchmark::DoNotOptimize(first + other);
  }
  set_rates(state, 4.0 * n * d);
}

void BM_Rule(benchmark::State& state, std::string spec) {
  const auto n = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  auto rule = ballot::robust::make_aggregator(spec);
  if (!rule.ok()) return state.SkipWithError(rule.error().to_string().c_str());
  if (auto status = (*rule)->check(n); !status.ok()) return state.SkipWithError(status.error().to_string().c_str());
  const auto& data = inputs_for(n, d);
  const InputMatrix view(data.data(), n, d);
  // One call before timing: at d = 1e6 only 3 calls are timed, and the first one also pays for
  // mapping fresh output pages (a training loop calls with the same shapes every round).
  if (auto warm = (*rule)->aggregate(view); !warm.ok()) return state.SkipWithError(warm.error().to_string().c_str());
  for (auto _ : state) {
    auto result = (*rule)->aggregate(view);
    if (!result.ok()) return state.SkipWithError(result.error().to_string().c_str());
    benchmark::DoNotOptimize(result->value.data());
  }
  set_rates(state, 4.0 * n * d);
}

void BM_PreAggregator(benchmark::State& state, std::string spec) {
  const auto n = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  auto stage = ballot::robust::make_pre_aggregator(spec);
  if (!stage.ok()) return state.SkipWithError(stage.error().to_string().c_str());
  const auto& data = inputs_for(n, d);
  const InputMatrix view(data.data(), n, d);
  if (auto warm = (*stage)->apply(view); !warm.ok()) return state.SkipWithError(warm.error().to_string().c_str());
  for (auto _ : state) {
    auto result = (*stage)->apply(view);
    if (!result.ok()) return state.SkipWithError(result.error().to_string().c_str());
    benchmark::DoNotOptimize(result->output.values.data());
  }
  set_rates(state, 4.0 * n * d);
}

// Sign vote: n packed vectors of d signs; its input is n·d/8 bytes.
void BM_MajorityVote(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  ballot::Rng rng(7);
  std::vector<ballot::BitVector> votes;
  for (std::size_t i = 0; i < n; ++i) {
    ballot::BitVector v(d);
    for (auto& w : v.words()) w = rng.next_u64();
    v.clear_padding();
    votes.push_back(std::move(v));
  }
  for (auto _ : state) {
    auto result = ballot::robust::majority_vote(votes);
    benchmark::DoNotOptimize(result->data());
  }
  set_rates(state, n * d / 8.0);
}

constexpr std::int64_t kInputs[] = {10, 25, 100};
constexpr std::int64_t kDims[] = {100000, 1000000};

std::size_t f_for(std::int64_t n) { return static_cast<std::size_t>((n - 3) / 4); }

// With --benchmark_repetitions=R the summary uses the fastest repetition of each benchmark (the
// "min" statistic: the least disturbed by other processes), also with
// --benchmark_report_aggregates_only=true.
double fastest(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }

void configure(benchmark::internal::Benchmark* b, std::int64_t d) {
  b->Unit(benchmark::kMillisecond)->UseRealTime()->ComputeStatistics("min", fastest);
  if (d >= 1000000)
    b->Iterations(3);
  else
    b->MinTime(0.05);
}

// Whether one of `specs` is of the entry `name`.
bool covers(const std::vector<std::string>& specs, std::string_view name) {
  return std::any_of(specs.begin(), specs.end(),
                     [name](const std::string& spec) { return ballot::Spec::parse(spec).value().name() == name; });
}

// Rules that search all C(n, f) subsets.
bool exponential(const std::string& spec) { return spec.rfind("mda", 0) == 0 || spec.rfind("smea", 0) == 0; }

void register_benchmarks() {
  benchmark::RegisterBenchmark("read_bandwidth_probe",
                               [](benchmark::State& state) {
                                 for (auto _ : state)
                                   benchmark::DoNotOptimize(ballot::bench::read_bandwidth(kProbeBytes, 1));
                                 set_rates(state, kProbeBytes);
                               })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Iterations(3);
  for (auto d : kDims) {
    for (auto n : kInputs) {
      const std::string f = std::to_string(f_for(n));
      configure(benchmark::RegisterBenchmark("read_input", BM_ReadInput)->Args({n, d}), d);
      configure(benchmark::RegisterBenchmark("read_input_2_threads", BM_ReadInputTwoThreads)->Args({n, d}), d);
      const std::vector<std::pair<std::string, bool>> rules = {{"mean", true},
                                                               {"median:f=" + f, true},
                                                               {"trimmed_mean:f=" + f, true},
                                                               {"meamed:f=" + f, true},
                                                               {"krum:f=" + f, true},
                                                               {"multi_krum:f=" + f, true},
                                                               {"bulyan:f=" + f, true},
                                                               {"centered_clipping:f=" + f + ",tau=1", true},
                                                               {"geometric_median:f=" + f, false},
                                                               {"mda:f=" + f, false}};
      // Every rule of the table is measured: one with no spec above runs at its example.
      std::vector<std::string> specs;
      for (const auto& [spec, target] : rules) specs.push_back(spec);
      for (const auto& entry : ballot::robust::rule_table())
        if (!covers(specs, entry.name)) specs.push_back(ballot::robust::example_with_f(entry, f_for(n)));
      for (const auto& spec : specs) {
        if (exponential(spec) && n > 25) continue;  // C(100, 24) subsets: refused by design
        configure(benchmark::RegisterBenchmark(("rule/" + spec).c_str(), BM_Rule, spec)->Args({n, d}), d);
      }
      std::vector<std::string> pre_specs = {"nnm:f=" + f, std::string("bucketing:s=2"), std::string("clipping:tau=1")};
      for (const auto& entry : ballot::robust::pre_aggregator_table())
        if (!covers(pre_specs, entry.name)) pre_specs.push_back(ballot::robust::example_with_f(entry, f_for(n)));
      for (const std::string& spec : pre_specs)
        configure(benchmark::RegisterBenchmark(("pre/" + spec).c_str(), BM_PreAggregator, spec)->Args({n, d}), d);
      // Rescaling stages before the mean: not written out (a read for the norms, a read for the sums).
      for (const std::string& spec : {std::string("clipping:tau=1 > mean"), "arc:f=" + f + " > mean"})
        configure(benchmark::RegisterBenchmark(("rule/" + spec).c_str(), BM_Rule, spec)->Args({n, d}), d);
      configure(
          benchmark::RegisterBenchmark("rule/mean:threads=2", BM_Rule, std::string("mean:threads=2"))->Args({n, d}), d);
      for (const std::string& spec : {"nnm:f=" + f + ",threads=2", std::string("bucketing:s=2,threads=2"),
                                      std::string("clipping:tau=1,threads=2")})
        configure(benchmark::RegisterBenchmark(("pre/" + spec).c_str(), BM_PreAggregator, spec)->Args({n, d}), d);
      configure(benchmark::RegisterBenchmark("vote/majority", BM_MajorityVote)->Args({n, d}), d);
    }
  }
}

class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  struct Row {
    std::string name;
    double seconds;
    double cpu_seconds;
  };
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.error_occurred) {
        skipped_.push_back(run.benchmark_name() + ": " + run.error_message);
        continue;
      }
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "min") continue;
      // One row per benchmark: its fastest repetition (repetitions, or their "min" aggregate).
      const std::string name = run.run_name.str();
      const double seconds = run.GetAdjustedRealTime() / 1e3, cpu_seconds = run.GetAdjustedCPUTime() / 1e3;
      const auto [it, added] = index_.emplace(name, rows_.size());
      if (added) {
        rows_.push_back({name, seconds, cpu_seconds});
      } else {
        rows_[it->second].seconds = std::min(rows_[it->second].seconds, seconds);
        rows_[it->second].cpu_seconds = std::min(rows_[it->second].cpu_seconds, cpu_seconds);
      }
    }
  }
  const std::vector<Row>& rows() const { return rows_; }
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  std::vector<Row> rows_;
  std::map<std::string, std::size_t> index_;
  std::vector<std::string> skipped_;
};

// "rule/krum:f=1/10/100000/iterations:3/real_time" -> {"rule/krum:f=1", "10", "100000"}
std::vector<std::string> split_name(const std::string& name) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = name.find('/', begin);
    parts.push_back(name.substr(begin, end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return parts;
}

void print_summary(const SummaryReporter& report) {
  std::printf("\nSummary (ISA %s; read bandwidth of one core over 1 GiB: %.2f GB/s)\n",
              std::string(ballot::kernels::isa_name(ballot::kernels::active_isa())).c_str(), g_read_bandwidth / 1e9);
  // On a shared machine wall time includes waiting for other processes, so the target column uses
  // the CPU-time ratio (rule CPU time / input-read CPU time, both single-threaded).
  std::map<std::string, double> read_time, read_cpu;  // "n/d" -> seconds to read the input once
  for (const auto& row : report.rows()) {
    const auto p = split_name(row.name);
    if (p[0] == "read_input") read_time[p[1] + "/" + p[2]] = row.seconds, read_cpu[p[1] + "/" + p[2]] = row.cpu_seconds;
  }
  std::map<std::string, double> wall;  // "spec/n/d" -> seconds, for the threads=2 speed-ups
  for (const auto& row : report.rows()) {
    const auto p = split_name(row.name);
    if (p.size() >= 4) wall[p[0] + "/" + p[1] + "/" + p[2] + "/" + p[3]] = row.seconds;
  }
  std::printf("%-40s %4s %8s %9s %9s %8s %8s %8s %8s %5s %7s\n", "rule", "n", "d", "ms", "cpu ms", "in GB/s", "x read",
              "x rd cpu", "x probe", "<=4x", "2 thr");
  for (const auto& row : report.rows()) {
    const auto p = split_name(row.name);
    if (p[0] == "read_input" || p[0] == "read_bandwidth_probe" || p.size() < 4) continue;
    if (p[0] == "read_input_2_threads") {
      const auto it = read_time.find(p[1] + "/" + p[2]);
      if (it != read_time.end())
        std::printf("%-40s %4s %8s %9.2f %9s %8.2f %8s %8s %8s %5s %7.2f\n", "read_input on 2 threads (the limit)",
                    p[1].c_str(), p[2].c_str(), row.seconds * 1e3, "-",
                    4.0 * std::stod(p[1]) * std::stod(p[2]) / row.seconds / 1e9, "-", "-", "-", "-",
                    it->second / row.seconds);
      continue;
    }
    const std::string spec = p[0] + "/" + p[1];
    const std::string key = p[2] + "/" + p[3];
    const double n = std::stod(p[2]), d = std::stod(p[3]);
    const double bytes = spec.rfind("vote/", 0) == 0 ? n * d / 8 : 4 * n * d;
    const double probe_time = bytes / g_read_bandwidth;
    const bool vote = spec.rfind("vote/", 0) == 0;  // its input is bits: compare with the probe
    const double x_read = vote ? row.seconds / probe_time : row.seconds / read_time[key];
    const double x_cpu = vote ? row.cpu_seconds / probe_time : row.cpu_seconds / read_cpu[key];
    // threads=2 variants: CPU time is the calling thread's only, so they are judged by wall time
    // against the threads=1 run of the same spec (the "2 thr" column).
    const std::size_t threads_at = spec.find("threads=2");
    const bool exempt = spec.find("geometric_median") != std::string::npos || spec.find("/mda") != std::string::npos ||
                        spec.rfind("pre/", 0) == 0 || spec.find('>') != std::string::npos ||
                        threads_at != std::string::npos;
    char speed_up[16] = "";
    if (threads_at != std::string::npos) {
      const std::string single = spec.substr(0, threads_at - 1);  // drop ",threads=2" or ":threads=2"
      const auto it = wall.find(single + "/" + p[2] + "/" + p[3]);
      if (it != wall.end()) std::snprintf(speed_up, sizeof speed_up, "%.2f", it->second / row.seconds);
    }
    std::printf("%-40s %4s %8s %9.2f %9.2f %8.2f %8.2f %8.2f %8.2f %5s %7s\n", spec.c_str(), p[2].c_str(), p[3].c_str(),
                row.seconds * 1e3, row.cpu_seconds * 1e3, bytes / row.seconds / 1e9, x_read, x_cpu,
                row.seconds / probe_time, exempt ? "-" : (x_cpu <= 4.0 ? "yes" : "NO"), speed_up);
  }
  for (const auto& s : report.skipped()) std::printf("skipped: %s\n", s.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  g_read_bandwidth = ballot::bench::read_bandwidth(kProbeBytes, 4);
  register_benchmarks();
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_summary(reporter);
  benchmark::Shutdown();
  return 0;
}
