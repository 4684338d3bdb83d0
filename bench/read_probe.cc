#include "bench/read_probe.h"

#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <chrono>

#include "core/aligned_allocator.h"

namespace ballot::bench {
namespace {

const AlignedVector<std::uint64_t>& buffer() {
  static const AlignedVector<std::uint64_t> words = [] {
    AlignedVector<std::uint64_t> w(kDramProbeBytes / 8);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = i;  // touch every page before timing
    return w;
  }();
  return words;
}

double now_seconds(bool cpu_time) {
  if (cpu_time) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) std::uint64_t sum_words(const std::uint64_t* words,
                                                                                     std::size_t count) {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < count; ++i) total += words[i];
  return total;
}

double read_bandwidth(std::size_t bytes, int passes, bool cpu_time) {
  bytes = std::min(bytes, kDramProbeBytes);
  const auto& words = buffer();
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const double start = now_seconds(cpu_time);
    benchmark::DoNotOptimize(sum_words(words.data(), bytes / 8));
    best = std::max(best, static_cast<double>(bytes) / (now_seconds(cpu_time) - start));
  }
  return best;
}

}  // namespace ballot::bench
