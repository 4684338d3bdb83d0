// Deep Gradient Compression (Lin, Han, Mao, Wang, Dally — ICLR 2018), the worker side.
//
// Per segment s (one per layer by default, the paper's choice; or the whole model), round t:
//   g  <- g · min(1, clip / ‖g_s‖₂)            local gradient clipping (§3.2), when clip > 0
//   u  <- m·u + g                              momentum correction (§3.1, eq. 5): the momentum
//   v  <- v + u                                is accumulated locally, not the raw gradient
//   send the entries of v above a threshold estimated from a sample of |v| (at most k_s of them)
//   v_i, u_i <- 0 for every sent i             momentum factor masking (§3.2)
// with k_s = ⌈ρ_t·n_s⌉ and the density ρ_t warmed up exponentially (§3.3): ρ_t = ρ₀·(ρ/ρ₀)^(t/W)
// for the first W rounds (ρ₀ = warmup_start, 0.25 = the paper's 75% sparsity), then ρ = ratio.
// The sampled threshold is their selection: `sample` (0.1–1% in the paper) of the segment's
// coordinates, drawn with replacement from the encode Rng, give the k·m/n-th largest |v|; all
// entries at or above it are sent; fewer than 0.8·k passing lowers it, more than k passing ends
// in an exact top-k among them (detail::select_by_sampled_threshold). Segments under
// kExactBelow coordinates use the exact top-k directly.
//
// Because the momentum is applied on the worker, the receiver applies the decoded update with
// plain SGD (no second momentum). The message is the sparse format of top-k under its own codec
// id (dgc): S u32 counts, the u32 indices (relative to the segment, increasing), the f32 values;
// 24 + 4S + 8K bytes with K <= Σ k_s, so wire_size() is an upper bound (the largest density of
// the schedule). Decoding validates every count and index, like top-k.
//
// Node state (checkpoints): u, v and the round counter t, saved with the codec-state format of
// coding/wire_format.h nested twice — outer memory v, inner memory u, innermost the u64 round
// count. Non-finite gradients: NaN/inf reach v and u, count as the largest magnitudes and are
// sent first (for the aggregator to reject); the masking then clears them from the state. Encode: O(d) (a fused
// momentum pass, a sample of m magnitudes, one or a few filtering passes). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "coding/codec.h"

namespace ballot::coding {

struct DgcOptions {
  double ratio = 0.001;        // final density ρ (0, 1]: 99.9% sparsity
  float momentum = 0.9f;       // m in [0, 1)
  float clip = 0.0f;           // L2 threshold per segment; 0 = no clipping
  std::uint64_t warmup = 0;    // rounds of the exponential density ramp; 0 = none
  double warmup_start = 0.25;  // ρ₀ (0, 1]: density at round 0 of the ramp
  double sample = 0.01;        // fraction of each segment sampled for the threshold (0, 1]
  Granularity granularity = Granularity::kLayer;
};

class DgcCodec final : public Codec {
 public:
  static constexpr std::size_t kExactBelow = 4096;  // smaller segments: exact top-k
  explicit DgcCodec(DgcOptions options = {});

  CodecId id() const noexcept override { return CodecId::kDgc; }
  std::string spec() const override;
  Granularity granularity() const noexcept override { return options_.granularity; }
  const DgcOptions& options() const noexcept { return options_; }

  EncodedGradient encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) override;
  Status decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout, std::span<float> accumulator,
                    float weight = 1.0f) const override;
  bool sparse_decode() const noexcept override { return true; }
  Result<SparseGradient> decode_entries(std::span<const std::uint8_t> bytes,
                                        const GradientLayout& layout) const override;
  // Upper bound: every segment at its largest budget of the schedule.
  std::size_t wire_size(const GradientLayout& layout) const override;
  using Codec::wire_size;
  bool exact_wire_size() const noexcept override { return false; }

  // The density of round t (the warm-up schedule).
  double density(std::uint64_t round) const noexcept;
  // How many coordinates of a segment of n with budget k the threshold is sampled from; 0 when the
  // selection is the exact top-k (segments under kExactBelow).
  std::size_t sample_count(std::size_t n, std::size_t k) const noexcept;
  // The state blob of (u, v, t), as save_state() writes it.
  static std::vector<std::uint8_t> state_blob(std::span<const float> momentum, std::span<const float> velocity,
                                              std::uint64_t rounds);

  bool stateful() const noexcept override { return true; }
  std::vector<std::uint8_t> save_state() const override;
  Status load_state(std::span<const std::uint8_t> state, const GradientLayout& layout) override;
  void reset_state() override;

  std::span<const float> momentum() const noexcept { return momentum_; }  // u
  std::span<const float> velocity() const noexcept { return velocity_; }  // v
  std::uint64_t rounds() const noexcept { return rounds_; }               // t

 private:
  DgcOptions options_;
  std::vector<float> momentum_;
  std::vector<float> velocity_;
  std::uint64_t rounds_ = 0;
};

}  // namespace ballot::coding
