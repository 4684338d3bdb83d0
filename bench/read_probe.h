// The physical limit most benchmarks compare with: how fast one core reads memory. Shared by every
// benchmark program so that all of them measure it the same way.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ballot::bench {

// Far larger than any last-level cache we run on (300 MiB reported on the development VM).
inline constexpr std::size_t kDramProbeBytes = std::size_t{1} << 30;
// Small enough to stay in such a cache: the limit for cache-resident working sets.
inline constexpr std::size_t kCacheProbeBytes = std::size_t{64} << 20;

// Sum of 64-bit words, compiled for the best vector unit present (target_clones), so that it is
// limited by memory and not by instruction throughput.
std::uint64_t sum_words(const std::uint64_t* words, std::size_t count);

// One core's read bandwidth in bytes per second: the best of `passes` sums over the first `bytes`
// (at most kDramProbeBytes) of one cache-line aligned buffer allocated on first use. With
// `cpu_time`, divides by the thread's CPU time instead of wall time (on a shared machine this
// keeps other processes' time out of the probe).
double read_bandwidth(std::size_t bytes = kDramProbeBytes, int passes = 5, bool cpu_time = false);

}  // namespace ballot::bench
