// The physical limit most benchmarks compare with: how fast one core reads memory. Shared by every
// benchmark program so that all of them measure it the same way.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ballot::bench {

// Far larger than any last-level cache we run on (32 MiB on the development VM's Zen 4; 300 MiB
// on an earlier one).
inline constexpr std::size_t kDramProbeBytes = std::size_t{1} << 30;
// Small enough to stay in such a cache: the limit for cache-resident working sets.
inline constexpr std::size_t kCacheProbeBytes = std::size_t{64} << 20;

// Reads `bytes` bytes once and returns a checksum of them (a sum of 64-bit words, and of the last
// bytes one by one): explicit vectors
// with independent accumulators, in the vector width (SSE2, AVX2, AVX-512) that reads memory
// fastest on this CPU, timed once on first use, so that it is limited by memory and not by
// instructions in every build type. The baseline of any benchmark that streams its input once.
std::uint64_t read_all(const void* data, std::size_t bytes);

// One core's read bandwidth in bytes per second: the best of `passes` sums over the first `bytes`
// (at most kDramProbeBytes) of one cache-line aligned buffer allocated on first use. With
// `cpu_time`, divides by the thread's CPU time instead of wall time (on a shared machine this
// keeps other processes' time out of the probe).
double read_bandwidth(std::size_t bytes = kDramProbeBytes, int passes = 5, bool cpu_time = false);

}  // namespace ballot::bench
