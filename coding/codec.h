// Codec: what a gradient becomes on the wire (ALGORITHMS.md §4).
//
// A codec turns the flat gradient buffer of a model (with its GradientLayout) into bytes and back.
// Every encoding starts with the 24-byte versioned header of coding/wire_format.h, which names the
// codec, the granularity and the layout it was made for; the rest is codec-specific and is
// specified, with its exact size, in docs/codecs.md.
//
// - encode() is for our own gradient. It never fails: a wrong-sized input is a caller bug
//   (BALLOT_ENFORCE). Non-finite inputs never crash; they travel as non-finite values for the
//   robust aggregators to reject. Stochastic codecs draw from `rng`, so the output is a pure
//   function of (options, state, gradient, layout, rng stream and position).
// - decode()/decode_add() take bytes from a peer. Every length, count, index, level and padding
//   bit is checked against the layout before anything is written; a bad buffer is an Error
//   (kMalformed), never undefined behaviour, and leaves the accumulator untouched. Decoding uses
//   the granularity and parameters carried on the wire, not the options of this object, so any
//   instance of the same codec family decodes any valid message.
// - Stateful codecs (Signum's momentum, error feedback's memory, global top-k's residual, DGC's
//   momentum and accumulation) expose
//   their node state through save_state()/load_state() for checkpoints.
//
// - decode_entries() is decode() as a list of entries. A sparsifying codec (sparse_decode() true:
//   top-k, threshold, random-k, global top-k, DGC) reads them from the message without writing d
//   floats: O(entries) (random-k: O(n_s/64 + k log k), its indices regenerated and sorted); the
//   others decode and list what is not +0.
//
// Thread-safety: decode*() and wire_size() are const and may run concurrently; encode() and the
// state functions mutate the codec and need external synchronisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/gradient_layout.h"
#include "core/result.h"
#include "core/rng.h"

namespace ballot::coding {

// Whole model (one scale / one budget over all coordinates) or per layer (one per segment of the
// layout). Dutta et al. (AAAI 2020) show the two behave differently.
enum class Granularity : std::uint8_t { kModel = 0, kLayer = 1 };

const char* granularity_name(Granularity granularity) noexcept;

// Identifies the codec family on the wire (byte 3 of the header). Values are stable.
enum class CodecId : std::uint8_t {
  kFp32 = 1,
  kFp16 = 2,
  kBf16 = 3,
  kSign = 4,
  kScaledSign = 5,
  kSignum = 6,
  kOneBit = 7,
  kTopK = 8,
  kRandomK = 9,
  kThreshold = 10,
  kGlobalTopK = 11,
  kQsgd = 12,
  kTernGrad = 13,
  kDgc = 14,
};

const char* codec_id_name(CodecId id) noexcept;

// One encoded gradient: header + payload.
struct EncodedGradient {
  std::vector<std::uint8_t> bytes;

  std::size_t size() const noexcept { return bytes.size(); }
  std::span<const std::uint8_t> view() const noexcept { return bytes; }
};

// A decoded gradient as its entries: indices strictly rising and below d, every coordinate not
// listed +0. Written out, it is decode()'s vector bit for bit (so a −0 on the wire is +0 here, as
// 0 + −0 is). It may list coordinates whose value is +0.
struct SparseGradient {
  std::vector<std::uint64_t> indices;
  std::vector<float> values;
};

class Codec {
 public:
  virtual ~Codec() = default;

  virtual CodecId id() const noexcept = 0;
  // Canonical registry spec of this instance, e.g. "qsgd:elias=1,granularity=layer,s=16".
  virtual std::string spec() const = 0;
  virtual Granularity granularity() const noexcept = 0;

  // gradient.size() == layout.total_size(). O(d) for every codec (top-k: expected O(d) selection).
  virtual EncodedGradient encode(std::span<const float> gradient, const GradientLayout& layout, Rng& rng) = 0;

  // accumulator[i] += weight * decoded[i]. accumulator.size() == layout.total_size() (caller
  // invariant). On error the accumulator is unchanged.
  virtual Status decode_add(std::span<const std::uint8_t> bytes, const GradientLayout& layout,
                            std::span<float> accumulator, float weight = 1.0f) const = 0;

  // The decoded gradient (zeros, then decode_add).
  Result<std::vector<float>> decode(std::span<const std::uint8_t> bytes, const GradientLayout& layout) const;

  // The decoded gradient as its entries; the same checks and errors as decode().
  virtual bool sparse_decode() const noexcept { return false; }
  virtual Result<SparseGradient> decode_entries(std::span<const std::uint8_t> bytes,
                                                const GradientLayout& layout) const;

  // Bytes of encode()'s output for `layout`: exact when exact_wire_size(), otherwise the largest
  // possible size (data-dependent codecs: threshold sparsification, Elias-coded QSGD).
  virtual std::size_t wire_size(const GradientLayout& layout) const = 0;
  std::size_t wire_size(std::size_t d) const { return wire_size(GradientLayout::whole(d)); }
  virtual bool exact_wire_size() const noexcept { return true; }

  // Node state for checkpoints. Stateless codecs save an empty blob and accept only an empty one.
  // load_state() validates the blob (it comes from a file) against `layout`.
  virtual bool stateful() const noexcept { return false; }
  virtual std::vector<std::uint8_t> save_state() const { return {}; }
  virtual Status load_state(std::span<const std::uint8_t> state, const GradientLayout& layout);
  virtual void reset_state() {}
};

}  // namespace ballot::coding
