// Krum and multi-Krum (robust/krum.h) on a CUDA device, for a server or an evaluator whose n
// inputs are already in GPU memory: only the n×n Gram matrix and the chosen indices cross to the
// host, never the n·d floats.
//
// How: the Gram matrix X·Xᵀ through cuBLAS — strided-batched SGEMMs over column blocks of
// kGramColumns floats (so that the whole GPU works even for n = 10), each block's float products
// summed in double on the device in a fixed order (chunks of about √blocks, each in order, then the
// chunks; the CPU also sums float blocks in double, in groups of blocks per thread) — then the
// distances, the scores and the choice on the host with the CPU rule's own code
// (robust/detail/common.h: distances_from_gram, krum_selection). The value is written on the
// device with the CPU's arithmetic: the chosen row itself (Krum), or Σ float(1/m)·x_i over the
// chosen rows in ascending order, each product and sum rounded to nearest in float (multi-Krum).
//
// What matches the CPU: for the same choice, the value and the report's selected, excluded and
// non_finite, bit for bit. What does not: the Gram's float sums are cuBLAS's, in another order
// than Eigen's (as the CPU's ISA levels differ among themselves), so scores differ in the last
// bits and inputs whose scores tie within that rounding may be chosen differently.
// Cost: the SGEMM reads the n·d floats once (n² d multiply-adds), plus one read of the chosen
// rows. Scratch comes from the stream-ordered allocator; cuBLAS is loaded at the first call
// (kUnavailable when the libcublas of the headers' major version cannot be), its handle kept per
// thread and device.
// Built only when BALLOT_HAVE_CUDA. Plain C++ API: streams as void*, device pointers d_.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "core/result.h"
#include "robust/aggregator.h"

namespace ballot::robust::cuda {

// Columns per block of the Gram matrix: each block's products are summed in float.
inline constexpr std::size_t kGramColumns = 4096;
// At most this many floats (256 MiB) of per-block Gram matrices per batched SGEMM: d = 25.6 M,
// n = 100 is 6250 blocks, 62.5 M floats, one call.
inline constexpr std::size_t kGramScratchFloats = std::size_t{1} << 26;

// Krum (m = 1) or multi-Krum with m chosen inputs (0: n − f, as MultiKrumOptions).
struct DistanceRule {
  std::size_t f = 0;
  std::size_t m = 1;
  bool multi = false;  // multi-Krum: the rule's name in errors, and m = 0 means n − f
};
// The device twin of a Krum or MultiKrum object; nullopt for every other rule. Needs no device.
std::optional<DistanceRule> distance_rule(const Aggregator& aggregator) noexcept;

// The CPU rule's precondition for n inputs (kPrecondition), and the m it chooses. Needs no device.
Result<std::size_t> chosen_count(const DistanceRule& rule, std::size_t n);

// The n×n Gram matrix of the rows (row i at d_inputs + i·d), lower triangle filled (i ≥ j at
// i·n + j; the rest 0), as distances_from_gram takes it, with SGEMM calls of at most
// scratch_floats / n² blocks each (at least one). Synchronises the stream.
Result<std::vector<double>> gram_on_device(const float* d_inputs, std::size_t n, std::size_t d, void* stream,
                                           std::size_t scratch_floats = kGramScratchFloats);

// The rule over the n rows, its value written to d_out (d floats, not overlapping the inputs).
// Returns the CPU rule's report. Synchronises the stream (the choice needs the Gram matrix on the
// host).
Result<AggregationReport> distance_rule_on_device(const DistanceRule& rule, const float* d_inputs, std::size_t n,
                                                  std::size_t d, float* d_out, void* stream);

// Host convenience for tests and small tools: copies the rows to the device, runs, copies back.
// kUnavailable without a device.
Result<AggregationResult> distance_rule_on_device(const DistanceRule& rule, const InputMatrix& inputs);

}  // namespace ballot::robust::cuda
