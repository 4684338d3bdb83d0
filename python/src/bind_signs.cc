// ballot._native bindings of kernels/: sign packing, unpacking, (weighted) majority vote and
// agreement. Outputs are allocated by the Python layer on the input's device and passed in, so CPU
// and CUDA share one signature; CUDA work is queued on the stream handle the caller passes
// (torch's current stream), never synchronised here.
//
// The node's hot path — Signum's momentum fused with the pack, and the update rules applied from a
// decision — runs the same per-coordinate arithmetic on both devices (kernels/update_logic.h), so
// a GPU replica and a CPU replica compute the same bits.
//
// On the CPU, packed inputs are validated and copied into BitVectors (BitVector::from_words: a
// wrong word count or a set padding bit is a ValueError) — d/8 bytes per vector, 1/32 of the
// floats they stand for.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "core/bit_vector.h"
#include "core/config.h"
#include "kernels/majority_vote.h"
#include "kernels/momentum.h"
#include "kernels/sign_kernels.h"
#include "kernels/update.h"
#include "python/src/native.h"
#if BALLOT_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ballot::python {
namespace {

void require_words(const Words& words, std::size_t d, const char* what) {
  if (words.count != BitVector::words_for(d))
    throw nb::value_error((std::string(what) + ": " + std::to_string(d) + " signs need " +
                           std::to_string(BitVector::words_for(d)) + " words, got " + std::to_string(words.count))
                              .c_str());
}

BitVector bits_of(const Words& words, std::size_t d, const char* what) {
  require_words(words, d, what);
  return unwrap(BitVector::from_words(d, {words.data, words.count}));
}

void copy_out(const BitVector& bits, const Words& out) {
  if (bits.num_words() == 0) return;  // memcpy's pointers must not be null, even for 0 bytes
  std::memcpy(out.data, bits.data(), bits.num_words() * sizeof(std::uint64_t));
}

#if !BALLOT_HAVE_CUDA
[[noreturn]] void no_cuda() {
  throw nb::value_error("CUDA arrays need a Ballot built with CUDA (this build has no CUDA kernels)");
}
#endif

// Where an array lives: the CPU, or one CUDA device (the id matters: one kernel launch reads and
// writes memory of the current device only).
struct Place {
  Device device = Device::kCpu;
  int id = 0;
};

Place place(const Words& words) { return {words.device, words.device == Device::kCuda ? words.device_id : 0}; }

Place place(nb::handle array, const char* what, Device device) {
  return {device, device == Device::kCuda ? as_array(array, what).device_id() : 0};
}

void same_device(Place a, Place b, const char* what) {
  if (a.device != b.device)
    throw nb::value_error((std::string(what) + ": input and output are on different devices").c_str());
  if (a.id != b.id)
    throw nb::value_error((std::string(what) + ": the arrays are on different CUDA devices (cuda:" +
                           std::to_string(a.id) + " and cuda:" + std::to_string(b.id) + ")")
                              .c_str());
}

void pack(nb::handle values, nb::handle out_words, std::uintptr_t stream) {
  const auto [in, device] = floats_on_device(values, "values", /*writable=*/false);
  const Words out = words_of(out_words, "out", /*writable=*/true);
  same_device(place(values, "values", device), place(out), "pack");
  require_words(out, in.size(), "out");
  if (device == Device::kCuda) {
#if BALLOT_HAVE_CUDA
    unwrap(require_current_device(out.device_id));
    unwrap(kernels::cuda::pack_signs(in.data(), in.size(), out.data, reinterpret_cast<void*>(stream)));
    return;
#else
    (void)stream;
    no_cuda();
#endif
  }
  BitVector bits;
  {
    nb::gil_scoped_release released;
    kernels::pack_signs(in, bits);
  }
  copy_out(bits, out);
}

void unpack(nb::handle words, std::size_t d, nb::handle out_values, float scale, std::uintptr_t stream) {
  const Words in = words_of(words, "signs", /*writable=*/false);
  const auto [out, device] = floats_on_device(out_values, "out", /*writable=*/true);
  same_device(place(in), place(out_values, "out", device), "unpack");
  require_words(in, d, "signs");
  if (out.size() != d) throw nb::value_error("out: must hold d floats");
  if (device == Device::kCuda) {
#if BALLOT_HAVE_CUDA
    unwrap(require_current_device(in.device_id));
    unwrap(kernels::cuda::unpack_signs(in.data, d, -scale, scale, out.data(), reinterpret_cast<void*>(stream)));
    return;
#else
    (void)stream;
    no_cuda();
#endif
  }
  const BitVector bits = bits_of(in, d, "signs");
  nb::gil_scoped_release released;
  kernels::unpack_signs(bits, out, scale);
}

// Rows of packed words: a list of 1-D arrays or one 2-D array (rows = voters).
struct WordRows {
  std::vector<Words> rows;
  std::vector<AnyArray> arrays;  // keep-alive
  bool contiguous_2d = false;    // one C-contiguous 2-D array (what the CUDA kernel reads)
};

WordRows word_rows(nb::handle inputs) {
  WordRows out;
  if (nb::isinstance<nb::list>(inputs) || nb::isinstance<nb::tuple>(inputs)) {
    const nb::sequence list = nb::borrow<nb::sequence>(inputs);
    for (std::size_t i = 0; i < nb::len(list); ++i) {
      const std::string name = "inputs[" + std::to_string(i) + "]";
      out.rows.push_back(words_of(list[i], name.c_str(), false));
      out.arrays.push_back(as_array(list[i], name.c_str()));
    }
    return out;
  }
  AnyArray matrix = as_array(inputs, "inputs");
  if (matrix.ndim() != 2) throw nb::value_error("inputs: expected a list of 1-D word arrays or one 2-D array");
  const auto t = matrix.dtype();
  if (t != nb::dtype<std::uint64_t>() && t != nb::dtype<std::int64_t>())
    throw nb::type_error("inputs: expected packed sign words of dtype uint64 or int64");
  if (matrix.shape(1) > 1 && matrix.stride(1) != 1)
    throw nb::value_error("inputs: the array is not contiguous along its last axis");
  auto* base =
      reinterpret_cast<std::uint64_t*>(static_cast<std::uint8_t*>(matrix.data_handle()) + matrix.byte_offset());
  const Device device = device_of(matrix.device_type(), "inputs");
  for (std::size_t i = 0; i < matrix.shape(0); ++i)
    out.rows.push_back(
        {base + static_cast<std::ptrdiff_t>(i) * matrix.stride(0), matrix.shape(1), device, matrix.device_id()});
  out.contiguous_2d = matrix.shape(0) <= 1 || matrix.shape(1) == 0 ||  // torch strides an empty row by 1
                      static_cast<std::size_t>(matrix.stride(0)) == matrix.shape(1);
  out.arrays.push_back(std::move(matrix));
  return out;
}

// `device_weights`: on CUDA, the weights as a 1-D int32/uint32 array on the output's device (the
// kernel reads them from device memory); ignored on the CPU.
void vote(nb::handle inputs, std::size_t d, std::optional<std::vector<std::uint32_t>> weights,
          nb::handle device_weights, nb::handle out_words, std::uintptr_t stream) {
  const WordRows rows = word_rows(inputs);
  const Words out = words_of(out_words, "out", /*writable=*/true);
  require_words(out, d, "out");
  if (weights && weights->size() != rows.rows.size())
    throw nb::value_error(
        ("weights: " + std::to_string(weights->size()) + " weights for " + std::to_string(rows.rows.size()) + " inputs")
            .c_str());
  std::uint64_t total = rows.rows.size();
  if (weights) {
    total = 0;
    for (auto w : *weights) total += w;
    if (total >= (std::uint64_t{1} << 32)) throw nb::value_error("weights: the total weight must be below 2^32");
  }
  for (std::size_t i = 0; i < rows.rows.size(); ++i) {
    same_device(place(rows.rows[i]), place(out), "majority_vote");
    require_words(rows.rows[i], d, ("inputs[" + std::to_string(i) + "]").c_str());
  }
  if (out.device == Device::kCuda) {
#if BALLOT_HAVE_CUDA
    if (!rows.contiguous_2d)
      throw nb::value_error("inputs: CUDA votes read one contiguous 2-D array of words (rows = voters)");
    if (total == 0)  // the all-+1 vote of the CPU; the kernel would also set the padding bits
      throw nb::value_error("weights: the total weight is 0 (an empty vote): vote on the CPU");
    unwrap(require_current_device(out.device_id));
    const std::uint64_t* first = rows.rows.empty() ? out.data : rows.rows.front().data;
    const std::uint32_t* d_weights = nullptr;
    AnyArray w;  // held until the kernel is queued
    if (weights) {
      w = as_array(device_weights, "device_weights");
      if ((w.dtype() != nb::dtype<std::int32_t>() && w.dtype() != nb::dtype<std::uint32_t>()) || w.ndim() != 1 ||
          w.shape(0) != rows.rows.size() || w.device_type() != nb::device::cuda::value ||
          w.device_id() != out.device_id || (w.shape(0) > 1 && w.stride(0) != 1))
        throw nb::value_error("device_weights: one contiguous 32-bit weight per input on the CUDA device");
      d_weights =
          reinterpret_cast<const std::uint32_t*>(static_cast<const std::uint8_t*>(w.data_handle()) + w.byte_offset());
    }
    unwrap(kernels::cuda::majority_vote(first, rows.rows.size(), BitVector::words_for(d), d_weights, total, out.data,
                                        reinterpret_cast<void*>(stream)));
    return;
#else
    (void)stream;
    (void)device_weights;
    no_cuda();
#endif
  }
  std::vector<BitVector> bits;
  bits.reserve(rows.rows.size());
  for (std::size_t i = 0; i < rows.rows.size(); ++i)
    bits.push_back(bits_of(rows.rows[i], d, ("inputs[" + std::to_string(i) + "]").c_str()));
  std::vector<const BitVector*> pointers;
  for (const auto& b : bits) pointers.push_back(&b);
  BitVector result(d);
  {
    nb::gil_scoped_release released;
    if (weights)
      kernels::weighted_majority_vote(pointers, *weights, result);
    else
      kernels::majority_vote(pointers, result);
  }
  copy_out(result, out);
}

// momentum ← β·momentum + (1−β)·gradient in place; out = the signs of the new momentum.
void momentum_pack(nb::handle momentum, nb::handle gradient, double beta, nb::handle out_words, std::uintptr_t stream) {
  if (!(beta >= 0.0 && beta < 1.0)) throw nb::value_error("beta: must be in [0, 1)");
  const auto [m, device] = floats_on_device(momentum, "momentum", /*writable=*/true);
  const auto [g, g_device] = floats_on_device(gradient, "gradient", /*writable=*/false);
  const Words out = words_of(out_words, "out", /*writable=*/true);
  const Place here = place(momentum, "momentum", device);
  same_device(here, place(gradient, "gradient", g_device), "momentum_pack");
  same_device(here, place(out), "momentum_pack");
  if (m.size() != g.size()) throw nb::value_error("momentum and gradient: sizes differ");
  require_words(out, m.size(), "out");
  if (device == Device::kCuda) {
#if BALLOT_HAVE_CUDA
    unwrap(require_current_device(here.id));
    unwrap(kernels::cuda::momentum_pack_signs(m.data(), g.data(), m.size(), kernels::momentum_factors(beta), out.data,
                                              reinterpret_cast<void*>(stream)));
    return;
#else
    (void)stream;
    no_cuda();
#endif
  }
  BitVector bits;
  {
    nb::gil_scoped_release released;
    kernels::signum_momentum(m, g, beta);
    kernels::pack_signs(m, bits);
  }
  copy_out(bits, out);
}

// One update from a decision, in place (learning/optimizer.h's sign / sgd / heavyball rules): the
// direction is the packed vote or an fp32 array (exactly one); the momentum buffer is needed when
// momentum > 0.
void apply_update(nb::handle params, nb::handle vote_words, nb::handle direction, nb::handle buffer, double lr,
                  double weight_decay, double momentum, double dampening, bool nesterov, bool first_step,
                  std::uintptr_t stream) {
  if (!(momentum >= 0.0 && momentum < 1.0)) throw nb::value_error("momentum: must be in [0, 1)");
  if (!(dampening >= 0.0 && dampening < 1.0)) throw nb::value_error("dampening: must be in [0, 1)");
  // Finite as the float32 values the update uses (1e39 is a finite double but +inf as a float).
  if (!std::isfinite(static_cast<float>(lr)) || !std::isfinite(static_cast<float>(weight_decay)))
    throw nb::value_error("lr and weight_decay: must be finite as float32");
  const kernels::SgdFactors factors{static_cast<float>(lr), static_cast<float>(weight_decay),
                                    static_cast<float>(momentum), static_cast<float>(1.0 - dampening), nesterov};
  const auto [x, device] = floats_on_device(params, "params", /*writable=*/true);
  const Place here = place(params, "params", device);
  const std::size_t d = x.size();
  if (vote_words.is_none() == direction.is_none())
    throw nb::value_error("apply_update: give exactly one of a vote and a direction");
  std::optional<Words> vote;
  HeldSpan<const float> g;
  if (!vote_words.is_none()) {
    vote = words_of(vote_words, "vote", /*writable=*/false);
    same_device(here, place(*vote), "apply_update");
    require_words(*vote, d, "vote");
  } else {
    const auto [values, g_device] = floats_on_device(direction, "direction", /*writable=*/false);
    same_device(here, place(direction, "direction", g_device), "apply_update");
    if (values.size() != d) throw nb::value_error("direction: must hold as many floats as params");
    g = HeldSpan<const float>(values, values.hold);
  }
  HeldSpan<float> b;
  if (factors.momentum != 0.0f) {
    if (buffer.is_none()) throw nb::value_error("buffer: an update with momentum needs its buffer");
    const auto [values, b_device] = floats_on_device(buffer, "buffer", /*writable=*/true);
    same_device(here, place(buffer, "buffer", b_device), "apply_update");
    if (values.size() != d) throw nb::value_error("buffer: must hold as many floats as params");
    b = values;  // with its hold
  }
  if (device == Device::kCuda) {
#if BALLOT_HAVE_CUDA
    unwrap(require_current_device(here.id));
    unwrap(kernels::cuda::apply_update(x.data(), vote ? vote->data : nullptr, vote ? nullptr : g.data(),
                                       b.empty() ? nullptr : b.data(), d, factors, first_step,
                                       reinterpret_cast<void*>(stream)));
    return;
#else
    (void)stream;
    no_cuda();
#endif
  }
  const BitVector bits = vote ? bits_of(*vote, d, "vote") : BitVector();
  nb::gil_scoped_release released;
  // The replica's own loops (kernels/update.h, as learning/optimizer.h's rules run them).
  if (vote) {
    kernels::apply_update(x, bits, b, factors, first_step);
  } else {
    kernels::apply_update(x, g, b, factors, first_step);
  }
}

std::size_t agreement(nb::handle a, nb::handle b, std::size_t d) {
  const Words wa = words_of(a, "a", false);
  const Words wb = words_of(b, "b", false);
  if (wa.device != Device::kCpu || wb.device != Device::kCpu) throw nb::value_error("agreement: CPU arrays only");
  return kernels::agreement_count(bits_of(wa, d, "a"), bits_of(wb, d, "b"));
}

int cuda_device_count() {
#if BALLOT_HAVE_CUDA
  return kernels::cuda::device_count();
#else
  return 0;
#endif
}

}  // namespace

void register_signs(nb::module_& m) {
  m.def("pack_signs", &pack, nb::arg("values"), nb::arg("out"), nb::arg("stream"));
  m.def("unpack_signs", &unpack, nb::arg("signs"), nb::arg("d"), nb::arg("out"), nb::arg("scale"), nb::arg("stream"));
  m.def("majority_vote", &vote, nb::arg("inputs"), nb::arg("d"), nb::arg("weights").none(),
        nb::arg("device_weights").none(), nb::arg("out"), nb::arg("stream"));
  m.def("momentum_pack", &momentum_pack, nb::arg("momentum"), nb::arg("gradient"), nb::arg("beta"), nb::arg("out"),
        nb::arg("stream"));
  m.def("apply_update", &apply_update, nb::arg("params"), nb::arg("vote").none(), nb::arg("direction").none(),
        nb::arg("buffer").none(), nb::arg("lr"), nb::arg("weight_decay"), nb::arg("momentum"), nb::arg("dampening"),
        nb::arg("nesterov"), nb::arg("first_step"), nb::arg("stream"));
  m.def("agreement", &agreement, nb::arg("a"), nb::arg("b"), nb::arg("d"));
  m.def("cuda_device_count", &cuda_device_count);
}

}  // namespace ballot::python
