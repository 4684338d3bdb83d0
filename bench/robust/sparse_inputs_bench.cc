// The server's gradient-path aggregation of sparsifying codecs' messages, both ways, in one run:
//   dense    decode every message into d floats, then the rule over the n×d matrix (what the
//            server did before robust/sparse_inputs.h);
//   entries  decode_entries() of every message, then aggregate_sparse() (what it does now);
//   floor    allocating and writing the d-float output once: the least any path that returns the
//            rule's output as a vector pays (the messages themselves are n·8k bytes, ~1 % of it).
// n nodes each send gtopk:ratio=0.01 of their own gradient (N(0, 1), independent), so the
// entries cover up to n·k distinct coordinates. Outputs are bit-identical (tests/robust). The
// allocator keeps freed blocks as the `ballot` program has it do (apps/main.cc), so that buffers
// of megabytes are reused instead of mapped and faulted in again every call.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <memory>
#include <string>
#include <vector>

#include "coding/codec_registry.h"
#include "core/gradient_layout.h"
#include "core/rng.h"
#include "robust/registry.h"
#include "robust/sparse_inputs.h"

namespace {

using ballot::GradientLayout;

struct Messages {
  GradientLayout layout;
  std::unique_ptr<ballot::coding::Codec> codec;
  std::vector<ballot::coding::EncodedGradient> encoded;
};

const Messages& messages_for(std::size_t n, std::size_t d) {
  static std::size_t cached_n = 0, cached_d = 0;
  static Messages m;
  if (cached_n != n || cached_d != d) {
    m.layout = GradientLayout::whole(d);
    m.codec = std::move(ballot::coding::make_codec("gtopk:ratio=0.01")).value();
    m.encoded.clear();
    std::vector<float> gradient(d);
    for (std::size_t i = 0; i < n; ++i) {
      ballot::Rng rng(1000 + i);
      for (auto& v : gradient) v = static_cast<float>(rng.normal());
      auto codec = std::move(ballot::coding::make_codec("gtopk:ratio=0.01")).value();
      m.encoded.push_back(codec->encode(gradient, m.layout, rng));
    }
    cached_n = n;
    cached_d = d;
  }
  return m;
}

void BM_Dense(benchmark::State& state, std::string spec) {
  const auto n = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  const auto& m = messages_for(n, d);
  auto rule = std::move(ballot::robust::make_aggregator(spec)).value();
  for (auto _ : state) {
    std::vector<std::vector<float>> rows;
    for (const auto& message : m.encoded) rows.push_back(std::move(m.codec->decode(message.bytes, m.layout)).value());
    auto result = rule->aggregate(std::move(ballot::robust::InputMatrix::from_rows(rows)).value());
    if (!result.ok()) return state.SkipWithError(result.error().to_string().c_str());
    benchmark::DoNotOptimize(result->value.data());
  }
}

void BM_Entries(benchmark::State& state, std::string spec) {
  const auto n = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  const auto& m = messages_for(n, d);
  auto rule = std::move(ballot::robust::make_aggregator(spec)).value();
  std::size_t listed = 0;
  for (auto _ : state) {
    std::vector<ballot::coding::SparseGradient> entries;
    std::vector<ballot::robust::SparseRow> rows;
    for (const auto& message : m.encoded)
      entries.push_back(std::move(m.codec->decode_entries(message.bytes, m.layout)).value());
    listed = 0;
    for (const auto& e : entries) {
      rows.push_back({e.indices, e.values});
      listed += e.indices.size();
    }
    auto result = ballot::robust::aggregate_sparse(*rule, rows, d);
    if (!result.ok()) return state.SkipWithError(result.error().to_string().c_str());
    benchmark::DoNotOptimize(result->value.data());
  }
  state.counters["entries"] = static_cast<double>(listed);
}

void BM_Floor(benchmark::State& state) {
  const auto d = static_cast<std::size_t>(state.range(1));
  for (auto _ : state) {
    std::vector<float> out(d, 0.0f);
    benchmark::DoNotOptimize(out.data());
  }
}

void shapes(benchmark::internal::Benchmark* b) {
  for (const std::int64_t d : {1'000'000, 11'200'000})
    for (const std::int64_t n : {4, 8}) b->Args({n, d});
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_Floor)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Dense, mean, std::string("mean"))->Apply(shapes);
BENCHMARK_CAPTURE(BM_Entries, mean, std::string("mean"))->Apply(shapes);
BENCHMARK_CAPTURE(BM_Dense, trimmed_mean, std::string("trimmed_mean:f=1"))->Apply(shapes);
BENCHMARK_CAPTURE(BM_Entries, trimmed_mean, std::string("trimmed_mean:f=1"))->Apply(shapes);
BENCHMARK_CAPTURE(BM_Dense, krum, std::string("krum:f=1"))->Apply(shapes);
BENCHMARK_CAPTURE(BM_Entries, krum, std::string("krum:f=1"))->Apply(shapes);

}  // namespace

int main(int argc, char** argv) {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
