// Election-coding benchmarks, single-threaded:
//   (a) the exhaustive tolerance certificate at n = 15, 21, 25 under both threat models, against a
//       scalar per-pattern baseline (popcount per node per pattern) measured in the same run;
//   (b) the minimum-redundancy search at (7, 1), (9, 1), (9, 2);
//   (c) Monte Carlo trials per second at the sanity setting (n = 15, b = 6);
//   (d) the replicated election (every node's vote + decoder) at d = 2^27 as a fraction of one
//       core's read bandwidth (probe over 1 GiB, as in bench/kernels_bench.cc).
// Results: bench/coding/ELECTION_RESULTS.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <vector>

#include "bench/read_probe.h"
#include "coding/code_search.h"
#include "coding/election_encoder.h"
#include "coding/election_monte_carlo.h"
#include "coding/tolerance.h"
#include "core/aligned_allocator.h"
#include "core/rng.h"

namespace {

using namespace ballot::coding;

double g_read_bandwidth = 0;  // thread-CPU-time read bandwidth (bench/read_probe.h)

// The general construction for n with b = (n−1)/4: a mix of singleton, complement and full rows.
AllocationMatrix code_for(std::size_t n) { return AllocationMatrix::deterministic(n, (n - 1) / 4).value(); }

// Baseline: the definition evaluated pattern by pattern (a popcount per node), no bit slicing.
int scalar_max_tolerated_b(const AllocationMatrix& g) {
  const std::size_t n = g.n();
  std::vector<std::uint64_t> rows(n);
  std::vector<int> thresholds(n);
  for (std::size_t i = 0; i < n; ++i) {
    rows[i] = g.row_mask(i);
    thresholds[i] = (std::popcount(rows[i]) + 1) / 2;
  }
  int min_a = static_cast<int>(n) + 1;
  const int mu_threshold = static_cast<int>((n + 1) / 2);
  for (std::uint64_t u = 0; u < (std::uint64_t{1} << n); ++u) {
    const bool mu = std::popcount(u) >= mu_threshold;
    int a = 0;
    for (std::size_t i = 0; i < n; ++i) a += (std::popcount(rows[i] & u) >= thresholds[i]) == mu;
    min_a = std::min(min_a, a);
  }
  return min_a - static_cast<int>(n / 2 + 1);
}

void BM_Certificate(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto model = state.range(1) == 0 ? ThreatModel::kVotesOnly : ThreatModel::kVotesAndSources;
  const auto g = code_for(n);
  int max_b = 0;
  for (auto _ : state) {
    const auto profile = max_tolerated_b(g, model).value();
    max_b = profile.max_b;
    benchmark::DoNotOptimize(max_b);
  }
  state.counters["max_b"] = max_b;
  state.counters["patterns_per_s"] =
      benchmark::Counter(static_cast<double>(std::uint64_t{1} << n), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(model == ThreatModel::kVotesOnly ? "(a) votes-only" : "(b) votes+sources");
}
BENCHMARK(BM_Certificate)->ArgsProduct({{15, 21, 25}, {0, 1}})->Unit(benchmark::kMillisecond);

void BM_ScalarCertificateBaseline(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto g = code_for(n);
  int max_b = 0;
  for (auto _ : state) {
    max_b = scalar_max_tolerated_b(g);
    benchmark::DoNotOptimize(max_b);
  }
  state.counters["max_b"] = max_b;
  state.counters["patterns_per_s"] =
      benchmark::Counter(static_cast<double>(std::uint64_t{1} << n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ScalarCertificateBaseline)->Arg(15)->Arg(21)->Arg(25)->Unit(benchmark::kMillisecond);

void BM_MinimumRedundancySearch(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto b = static_cast<std::size_t>(state.range(1));
  CodeSearchResult result;
  for (auto _ : state) {
    result = find_minimum_redundancy_code(n, b).value();
    benchmark::DoNotOptimize(result.ones);
  }
  state.counters["ones"] = static_cast<double>(result.ones);
  state.counters["construction_ones"] = static_cast<double>(result.construction_ones);
  state.counters["visits"] = static_cast<double>(result.visits);
  state.counters["proven"] = result.proven_optimal ? 1 : 0;
}
BENCHMARK(BM_MinimumRedundancySearch)
    ->Args({5, 1})
    ->Args({7, 1})
    ->Args({9, 1})
    ->Args({9, 2})
    ->Unit(benchmark::kMillisecond);

void BM_MonteCarlo(benchmark::State& state) {
  MonteCarloOptions o;
  o.b = 6;
  o.q = 0.9;
  o.ties = TieRule::kAbstain;
  o.trials = std::uint64_t{1} << 16;
  const bool bernoulli = state.range(0) != 0;
  double error = 0;
  for (auto _ : state) {
    const auto est =
        bernoulli ? estimate_error_bernoulli(15, 2.0, o) : estimate_error(AllocationMatrix::identity(15), o);
    // Not DoNotOptimize(double): benchmark 1.7's "+m,r" constraint garbles floating values
    // under GCC; the integer count keeps the work alive.
    std::uint64_t errors = est.value().errors;
    benchmark::DoNotOptimize(errors);
    error = est.value().error;
    ++o.seed;
  }
  state.counters["p_error"] = benchmark::Counter(error);
  state.counters["trials_per_s"] =
      benchmark::Counter(static_cast<double>(o.trials), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(bernoulli ? "Bernoulli r=2, redrawn per 64 trials" : "majority vote (G = I)");
}
BENCHMARK(BM_MonteCarlo)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_ElectReplicated(benchmark::State& state) {
  const std::size_t n = 15, d = std::size_t{1} << 27;  // 16 MiB per vector: beyond the last-level cache
  const auto g = state.range(0) == 0 ? AllocationMatrix::identity(n) : AllocationMatrix::deterministic(n, 3).value();
  ballot::Rng rng(3);
  std::vector<ballot::BitVector> signs(n, ballot::BitVector(d));
  for (auto& s : signs)
    for (auto& w : s.words()) w = rng.next_u64();
  std::vector<ballot::BitVector> votes;
  ballot::BitVector out;
  elect_replicated(g, signs, votes, out);  // warm-up: allocate and fault in the outputs
  for (auto _ : state) {
    elect_replicated(g, signs, votes, out);
    benchmark::DoNotOptimize(out.data());
  }
  // Bytes read: every node reads its row's sign vectors, the decoder reads n votes.
  const double bytes = static_cast<double>(g.ones() + n) * static_cast<double>(d) / 8.0;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes * static_cast<double>(state.iterations())));
  state.counters["of_read_bw"] =
      benchmark::Counter(bytes / g_read_bandwidth, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(state.range(0) == 0 ? "G = I" : "deterministic(15, 3)");
}
BENCHMARK(BM_ElectReplicated)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  g_read_bandwidth = ballot::bench::read_bandwidth(ballot::bench::kDramProbeBytes, 3, /*cpu_time=*/true);
  std::printf("read bandwidth (one core, 1 GiB probe): %.2f GB/s\n", g_read_bandwidth / 1e9);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
