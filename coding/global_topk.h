// Global top-k sparsification (Shi et al., ICDCS 2019, "gTop-k S-SGD"), both sides.
//
// Worker (GlobalTopKCodec): adds its residual to the gradient, sends the local top-k of the
// result (the top-k wire format with codec id gtopk), and keeps what it did not send as residual.
// Aggregator (global_topk_reduce): sums the workers' sparse messages and keeps the k largest
// |sum| (the global index set), which it sends back with the summed — or averaged — values
// (flag bit 0 marks that message). The worker then calls accept_global(): the locally selected
// values that did not make the global set go back into its residual, so nothing is lost.
// Decoding either message adds the values it carries. The residual is node state (checkpoints,
// taken between rounds: a local selection still waiting for its global set is not saved).
// Cost: worker O(d); aggregator O(n·k + d) with a dense d-float sum. Deterministic.
#pragma once

#include <vector>

#include "coding/codec.h"
#include "coding/sparse_codecs.h"

namespace ballot::coding {

class GlobalTopKCodec final : public Codec {
 public:
  // Header flag bit 0: the aggregator's global message.
  static constexpr std::uint8_t kGlobalFlag = 1;
  explicit GlobalTopKCodec(SparseOptions options = {}) : options_(options) {}

  CodecId id() const noexcept override { return CodecId::kGlobalTopK; }
  std::string spec() const override;
  Granularity granularity() const noexcept override { return options_.granularity; }
  const SparseOptions& options() const noexcept { return options_; }

  // The local top-k of gradient + residual. Afterwards the residual holds everything not sent.
  EncodedGradient encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) override;
  // Decodes a worker message or the aggregator's global message.
  Status decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout, std::span<float> accumulator,
                    float weight = 1.0f) const override;
  bool sparse_decode() const noexcept override { return true; }
  Result<SparseGradient> decode_entries(std::span<const std::uint8_t> bytes,
                                        const GradientLayout& layout) const override;
  std::size_t wire_size(const GradientLayout& layout) const override;
  using Codec::wire_size;

  // Puts back into the residual the values of the last encode() whose index is not in the
  // aggregator's global message. Validates the message (it comes from the network).
  Status accept_global(std::span<const std::uint8_t> global, const GradientLayout& layout);
  // Forgets the last encode()'s selection, putting nothing back: its global set will not come (a
  // state transfer moved the node past its round), and what that round applied is not known.
  void drop_selection() noexcept;

  bool stateful() const noexcept override { return true; }
  std::vector<std::uint8_t> save_state() const override;
  Status load_state(std::span<const std::uint8_t> state, const GradientLayout& layout) override;
  void reset_state() override;
  std::span<const float> residual() const noexcept { return residual_; }

 private:
  SparseOptions options_;
  std::vector<float> residual_;
  // The last local selection: global indices and the values sent, until accept_global().
  std::vector<std::size_t> sent_indices_;
  std::vector<float> sent_values_;
};

struct GlobalTopKReduceOptions {
  SparseOptions budget;  // k of the global set (and its granularity)
  bool average = false;  // send the mean over the messages instead of the sum
};

// The aggregator side over a dense aggregate (a robust rule's output, say, in a Ballot cluster):
// keeps its k largest |value| per segment (the budget's k or ratio, and its granularity; ties to
// the lowest index, NaN as +inf) and sets every other coordinate to +0. What remains is the
// round's update.
void keep_global_top_k(std::span<float> aggregate, const GradientLayout& layout, const SparseOptions& budget);

// The global message (kGlobalFlag) of an update the workers applied: per segment of
// `granularity`, every coordinate it changes (value not ±0; NaN included), with its value. A
// worker passes it to accept_global(): what it sent for any other coordinate goes back into its
// residual. For keep_global_top_k's output that is its global set, but for coordinates whose
// aggregate was 0 (nothing was applied there, so nothing is lost).
EncodedGradient global_set_of(std::span<const float> applied, const GradientLayout& layout, Granularity granularity);
// The same for an update given as its entries (a sparse decision's: indices strictly rising and
// below d, every other coordinate +0), in O(entries).
EncodedGradient global_set_of(const SparseGradient& applied, const GradientLayout& layout, Granularity granularity);

// The aggregator side: validates every worker message (gtopk format, for `layout`), sums them and
// returns the global message. An invalid message is an error naming its position (the caller
// decides whether to drop that worker and retry).
Result<EncodedGradient> global_topk_reduce(std::span<const std::span<const std::uint8_t>> messages,
                                           const GradientLayout& layout, const GlobalTopKReduceOptions& options);

}  // namespace ballot::coding
