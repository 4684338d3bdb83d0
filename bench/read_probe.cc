#include "bench/read_probe.h"

#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>

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

// Reads `bytes` bytes in vectors of type Lane with four independent accumulators, written out so
// that every build type gets the vector loop (at -O2 GCC 12 leaves a plain `total += words[i]`
// loop scalar: one 8-byte add per iteration, which no memory system needs to wait for). Loads go
// through memcpy, so any bytes may be read (floats, bit vectors) without breaking aliasing rules.
template <class Lane>
__attribute__((always_inline)) inline std::uint64_t sum_lanes(const void* data, std::size_t bytes) {
  constexpr std::size_t kStep = 4 * sizeof(Lane);
  const auto* p = static_cast<const unsigned char*>(data);
  Lane a{}, b{}, c{}, d{};
  std::size_t i = 0;
  for (; i + kStep <= bytes; i += kStep) {
    Lane x, y, z, w;
    std::memcpy(&x, p + i, sizeof(Lane));
    std::memcpy(&y, p + i + sizeof(Lane), sizeof(Lane));
    std::memcpy(&z, p + i + 2 * sizeof(Lane), sizeof(Lane));
    std::memcpy(&w, p + i + 3 * sizeof(Lane), sizeof(Lane));
    a += x;
    b += y;
    c += z;
    d += w;
  }
  const Lane sum = (a + b) + (c + d);
  std::uint64_t total = 0;
  for (std::size_t k = 0; k < sizeof(Lane) / 8; ++k) total += sum[k];
  for (; i < bytes; ++i) total += p[i];
  return total;
}

using Lane16 = std::uint64_t __attribute__((vector_size(16)));
using Lane32 = std::uint64_t __attribute__((vector_size(32)));
using Lane64 = std::uint64_t __attribute__((vector_size(64)));

std::uint64_t read_sse2(const void* data, std::size_t bytes) { return sum_lanes<Lane16>(data, bytes); }
__attribute__((target("avx2"))) std::uint64_t read_avx2(const void* data, std::size_t bytes) {
  return sum_lanes<Lane32>(data, bytes);
}
__attribute__((target("avx512f"))) std::uint64_t read_avx512(const void* data, std::size_t bytes) {
  return sum_lanes<Lane64>(data, bytes);
}

using Reader = std::uint64_t (*)(const void*, std::size_t);

double seconds_of(Reader read, const void* data, std::size_t bytes, bool cpu_time) {
  const double start = now_seconds(cpu_time);
  benchmark::DoNotOptimize(read(data, bytes));
  return now_seconds(cpu_time) - start;
}

// The widest vectors are not always the fastest reader: on the Zen 4 development VM the xmm loop
// reads a 1 GiB buffer ~15 % faster than the zmm one. Each width this CPU has is timed over the
// whole probe buffer (two passes, best kept; 1 GiB, beyond any last-level cache we run on) and the
// fastest is used from then on.
Reader fastest_reader() {
  static const Reader chosen = [] {
    const auto& words = buffer();
    constexpr std::size_t kBytes = kDramProbeBytes;
    Reader best = read_sse2;
    double best_seconds = 1e30;
    const auto consider = [&](Reader reader) {
      for (int pass = 0; pass < 2; ++pass) {
        const double s = seconds_of(reader, words.data(), kBytes, true);
        if (s < best_seconds) best_seconds = s, best = reader;
      }
    };
    consider(read_sse2);
    if (__builtin_cpu_supports("avx2")) consider(read_avx2);
    if (__builtin_cpu_supports("avx512f")) consider(read_avx512);
    return best;
  }();
  return chosen;
}

}  // namespace

std::uint64_t read_all(const void* data, std::size_t bytes) { return fastest_reader()(data, bytes); }

double read_bandwidth(std::size_t bytes, int passes, bool cpu_time) {
  bytes = std::min(bytes, kDramProbeBytes);
  const auto& words = buffer();
  const Reader read = fastest_reader();
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    best = std::max(best, static_cast<double>(bytes) / seconds_of(read, words.data(), bytes, cpu_time));
  }
  return best;
}

}  // namespace ballot::bench
