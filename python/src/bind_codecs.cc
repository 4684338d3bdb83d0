// ballot._native bindings of coding/: gradient codecs from registry strings, with their node state.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "coding/codec_registry.h"
#include "coding/error_feedback.h"
#include "coding/global_topk.h"
#include "core/config.h"
#include "core/rng.h"
#include "python/src/codec_on_device.h"
#include "python/src/native.h"
#if BALLOT_HAVE_CUDA
#include "coding/cuda/codecs_cuda.h"
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ballot::python {
namespace {

using LayerSizes = std::vector<std::pair<std::string, std::size_t>>;

GradientLayout layout_of(const LayerSizes& layers) { return unwrap(GradientLayout::from_sizes(layers)); }

std::span<const std::uint8_t> byte_view(const nb::bytes& data) {
  return {static_cast<const std::uint8_t*>(data.data()), data.size()};
}

void require_size(std::size_t got, const GradientLayout& layout, const char* what) {
  if (got != layout.total_size())
    throw nb::value_error((std::string(what) + ": has " + std::to_string(got) + " elements, the layout " +
                           std::to_string(layout.total_size()))
                              .c_str());
}

// One codec instance and the random stream its stochastic encoders draw from. Encoding mutates
// both and runs without the GIL, so the state-touching calls hold a mutex (a shared Codec object
// is serialised, never raced).
class NativeCodec {
 public:
  NativeCodec(const std::string& spec, std::uint64_t seed, std::uint64_t stream)
      : codec_(unwrap(coding::make_codec(spec))), device_(*codec_), rng_(seed, stream) {}

  std::string spec() const { return codec_->spec(); }
  std::string name() const { return coding::codec_id_name(codec_->id()); }
  std::string granularity() const { return coding::granularity_name(codec_->granularity()); }
  bool stateful() const { return codec_->stateful(); }
  bool exact_wire_size() const { return codec_->exact_wire_size(); }
  std::size_t wire_size(const LayerSizes& layers) const { return codec_->wire_size(layout_of(layers)); }

  // A CUDA gradient is encoded on the device (coding/cuda: every codec of the registry; a codec's
  // state then lives on the device until the host needs it), on the caller's
  // stream; the message comes back as bytes.
  nb::bytes encode(nb::handle gradient, const LayerSizes& layers, std::uintptr_t stream) {
    const GradientLayout layout = layout_of(layers);
    const auto [values, device] = floats_on_device(gradient, "gradient", /*writable=*/false);
    require_size(values.size(), layout, "gradient");
    const int device_id = device == Device::kCuda ? as_array(gradient, "gradient").device_id() : -1;
    if (device == Device::kCuda) {
      // The message is copied once, from the encoder's pinned buffer (valid while the lock is held)
      // into the bytes object. Its size is known before the encode except threshold's: that
      // object is made first, with the GIL, and filled without it (nothing else can see it yet;
      // taking the GIL under the lock could deadlock with a caller that holds the GIL and waits
      // for the lock). Threshold's message goes through a vector.
      const bool exact = codec_->exact_wire_size();
      const std::size_t size = exact ? codec_->wire_size(layout) : 0;
      nb::object message;
      char* into = nullptr;
      if (exact) {
        message = nb::steal(PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size)));
        if (!message.is_valid()) throw nb::python_error();
        into = PyBytes_AS_STRING(message.ptr());
      }
      std::vector<std::uint8_t> copy;
      Status status;
      {
        nb::gil_scoped_release released;
        const std::lock_guard lock(mutex_);
        const auto encoded = device_.encode(values.data(), device_id, layout, rng_, reinterpret_cast<void*>(stream));
        if (!encoded.ok()) {
          status = encoded.error();
        } else if (!exact) {
          copy.assign(encoded->begin(), encoded->end());
        } else if (encoded->size() != size) {
          status = make_error(ErrorCode::kInternal, "device encode: the message is not the codec's wire size");
        } else if (size > 0) {
          std::memcpy(into, encoded->data(), size);
        }
      }
      unwrap(std::move(status));
      if (!exact) return nb::bytes(copy.data(), copy.size());
      return nb::borrow<nb::bytes>(message);
    }
    Result<coding::EncodedGradient> encoded = make_error(ErrorCode::kInternal, "not run");
    {
      nb::gil_scoped_release released;
      const std::lock_guard lock(mutex_);
      const Status synced = device_.sync_host();
      if (synced.ok()) device_.forget();  // the host's encode moves the state and makes the selection
      encoded = synced.ok() ? Result<coding::EncodedGradient>(codec_->encode(values, layout, rng_))
                            : Result<coding::EncodedGradient>(synced.error());
    }
    const coding::EncodedGradient message = unwrap(std::move(encoded));
    return nb::bytes(message.bytes.data(), message.bytes.size());
  }

  nb::ndarray<nb::numpy, float, nb::ndim<1>> decode(const nb::bytes& data, const LayerSizes& layers) const {
    const GradientLayout layout = layout_of(layers);
    Result<std::vector<float>> decoded = make_error(ErrorCode::kInternal, "not run");
    {
      nb::gil_scoped_release released;
      decoded = codec_->decode(byte_view(data), layout);
    }
    return to_numpy(unwrap(std::move(decoded)));
  }

  // A CUDA accumulator is added to on the device (the bytes are checked on the host first).
  void decode_add(const nb::bytes& data, nb::handle accumulator, const LayerSizes& layers, float weight,
                  std::uintptr_t stream) const {
    if (!std::isfinite(weight)) throw nb::value_error("weight: must be finite as float32");
    const GradientLayout layout = layout_of(layers);
    const auto [out, device] = floats_on_device(accumulator, "accumulator", /*writable=*/true);
    require_size(out.size(), layout, "accumulator");
    const int device_id = device == Device::kCuda ? as_array(accumulator, "accumulator").device_id() : -1;
    Status status;
    {
      nb::gil_scoped_release released;
      if (device == Device::kCuda) {
        status =
            decode_add_on_cuda(byte_view(data), layout, out.data(), device_id, weight, reinterpret_cast<void*>(stream));
      } else {
        status = codec_->decode_add(byte_view(data), layout, out, weight);
      }
    }
    unwrap(std::move(status));
  }

  nb::bytes save_state() const {
    const std::lock_guard lock(mutex_);
    unwrap(device_.sync_host());
    const std::vector<std::uint8_t> state = codec_->save_state();
    return nb::bytes(state.data(), state.size());
  }
  void load_state(const nb::bytes& state, const LayerSizes& layers) {
    const GradientLayout layout = layout_of(layers);
    const std::lock_guard lock(mutex_);
    unwrap(codec_->load_state(byte_view(state), layout));
    device_.forget();
  }
  void reset_state() {
    const std::lock_guard lock(mutex_);
    codec_->reset_state();
    device_.forget();
  }

  // The error-feedback memory e (a copy), or None for a codec without error feedback.
  nb::object memory() const {
    const auto* ef = dynamic_cast<const coding::ErrorFeedback*>(codec_.get());
    if (ef == nullptr) return nb::none();
    std::vector<float> copy;
    {
      const std::lock_guard lock(mutex_);
      unwrap(device_.sync_host());
      copy.assign(ef->memory().begin(), ef->memory().end());
    }
    return nb::cast(to_numpy(std::move(copy)));
  }

  // Global top-k: the aggregator's global message for the last encode (where the codec's state
  // lives: the device after a CUDA encode). A bad message is a ValueError and changes nothing.
  void accept_global(const nb::bytes& global, const LayerSizes& layers, std::uintptr_t stream) {
    const GradientLayout layout = layout_of(layers);
    const auto bytes = byte_view(global);
    Status status;
    {
      nb::gil_scoped_release released;
      const std::lock_guard lock(mutex_);
      status = device_.accept_global(bytes, layout, reinterpret_cast<void*>(stream));
    }
    unwrap(std::move(status));
  }

  std::uint64_t rng_position() const {
    const std::lock_guard lock(mutex_);
    return rng_.position();
  }

 private:
#if BALLOT_HAVE_CUDA
  Status decode_add_on_cuda(std::span<const std::uint8_t> bytes, const GradientLayout& layout, float* d_accumulator,
                            int device_id, float weight, void* stream) const {
    BALLOT_TRY(require_current_device(device_id));
    if (!CodecOnDevice::supports(*codec_)) return CodecOnDevice::unsupported(*codec_);
    const auto* feedback = dynamic_cast<const coding::ErrorFeedback*>(codec_.get());
    const coding::Codec& decoder = feedback != nullptr ? feedback->inner() : *codec_;
    // One decode workspace per device use; concurrent decodes take turns on it.
    const std::lock_guard lock(decode_mutex_);
    if (!decode_workspace_ || decode_device_ != device_id) {
      decode_workspace_ = std::make_unique<coding::cuda::Workspace>();
      decode_device_ = device_id;
    }
    return coding::cuda::decode_add(decoder, bytes, layout, d_accumulator, weight, *decode_workspace_, stream);
  }
  mutable std::mutex decode_mutex_;
  mutable std::unique_ptr<coding::cuda::Workspace> decode_workspace_;
  mutable int decode_device_ = -1;
#else
  Status decode_add_on_cuda(std::span<const std::uint8_t>, const GradientLayout&, float*, int, float, void*) const {
    return no_cuda();
  }
  static Error no_cuda() {
    return make_error(ErrorCode::kInvalidArgument,
                      "CUDA arrays need a Ballot built with CUDA (this build has no CUDA kernels)");
  }
#endif

  std::unique_ptr<coding::Codec> codec_;
  mutable CodecOnDevice device_;  // its GPU side: a CUDA gradient's encoder, the codec's state there
  Rng rng_;
  mutable std::mutex mutex_;
};

// The budget of a global top-k spec ("gtopk:ratio=0.01"); a ValueError for another codec.
coding::SparseOptions global_budget(const std::string& spec) {
  const auto codec = unwrap(coding::make_codec(spec));
  const auto* gtopk = dynamic_cast<const coding::GlobalTopKCodec*>(codec.get());
  if (gtopk == nullptr) throw nb::value_error(("spec: expected a gtopk codec, got '" + spec + "'").c_str());
  return gtopk->options();
}

nb::bytes global_topk_reduce(const std::vector<nb::bytes>& messages, const LayerSizes& layers, const std::string& spec,
                             bool average) {
  const GradientLayout layout = layout_of(layers);
  const coding::GlobalTopKReduceOptions options{global_budget(spec), average};
  std::vector<std::span<const std::uint8_t>> views;
  for (const nb::bytes& message : messages) views.push_back(byte_view(message));
  Result<coding::EncodedGradient> reduced = make_error(ErrorCode::kInternal, "not run");
  {
    nb::gil_scoped_release released;
    reduced = coding::global_topk_reduce(views, layout, options);
  }
  const coding::EncodedGradient global = unwrap(std::move(reduced));
  return nb::bytes(global.bytes.data(), global.bytes.size());
}

nb::bytes keep_global_top_k(nb::handle aggregate, const LayerSizes& layers, const std::string& spec) {
  const GradientLayout layout = layout_of(layers);
  const coding::SparseOptions budget = global_budget(spec);
  const auto [values, device] = floats_on_device(aggregate, "aggregate", /*writable=*/true);
  if (device != Device::kCpu) throw nb::value_error("aggregate: expected a CPU array");
  require_size(values.size(), layout, "aggregate");
  coding::EncodedGradient global;
  {
    nb::gil_scoped_release released;
    coding::keep_global_top_k(values, layout, budget);
    global = coding::global_set_of(values, layout, budget.granularity);
  }
  return nb::bytes(global.bytes.data(), global.bytes.size());
}

}  // namespace

void register_codecs(nb::module_& m) {
  nb::class_<NativeCodec>(m, "Codec")
      .def(nb::init<const std::string&, std::uint64_t, std::uint64_t>(), nb::arg("spec"), nb::arg("seed"),
           nb::arg("stream"))
      .def_prop_ro("spec", &NativeCodec::spec)
      .def_prop_ro("name", &NativeCodec::name)
      .def_prop_ro("granularity", &NativeCodec::granularity)
      .def_prop_ro("stateful", &NativeCodec::stateful)
      .def_prop_ro("exact_wire_size", &NativeCodec::exact_wire_size)
      .def_prop_ro("memory", &NativeCodec::memory)
      .def_prop_ro("rng_position", &NativeCodec::rng_position)
      .def("wire_size", &NativeCodec::wire_size, nb::arg("layers"))
      .def("encode", &NativeCodec::encode, nb::arg("gradient"), nb::arg("layers"), nb::arg("stream") = 0)
      .def("decode", &NativeCodec::decode, nb::arg("data"), nb::arg("layers"))
      .def("decode_add", &NativeCodec::decode_add, nb::arg("data"), nb::arg("accumulator"), nb::arg("layers"),
           nb::arg("weight"), nb::arg("stream") = 0)
      .def("save_state", &NativeCodec::save_state)
      .def("load_state", &NativeCodec::load_state, nb::arg("state"), nb::arg("layers"))
      .def("reset_state", &NativeCodec::reset_state)
      .def("accept_global", &NativeCodec::accept_global, nb::arg("global_message"), nb::arg("layers"),
           nb::arg("stream") = 0);
  m.def("global_topk_reduce", &global_topk_reduce, nb::arg("messages"), nb::arg("layers"), nb::arg("spec"),
        nb::arg("average"));
  m.def("keep_global_top_k", &keep_global_top_k, nb::arg("aggregate"), nb::arg("layers"), nb::arg("spec"));
  m.def("codec_names", &coding::codec_names);
  // One valid spec per line of the codec table (coding/codec_registry.h), in table order.
  m.def("codec_examples", [] {
    std::vector<std::string> out;
    for (const coding::CodecEntry& entry : coding::codec_table()) out.emplace_back(entry.example);
    return out;
  });
}

}  // namespace ballot::python
