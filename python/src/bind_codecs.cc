// ballot._native bindings of coding/: gradient codecs from registry strings, with their node state.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <mutex>

#include "coding/codec_registry.h"
#include "coding/error_feedback.h"
#include "core/rng.h"
#include "python/src/native.h"

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
      : codec_(unwrap(coding::make_codec(spec))), rng_(seed, stream) {}

  std::string spec() const { return codec_->spec(); }
  std::string name() const { return coding::codec_id_name(codec_->id()); }
  std::string granularity() const { return coding::granularity_name(codec_->granularity()); }
  bool stateful() const { return codec_->stateful(); }
  bool exact_wire_size() const { return codec_->exact_wire_size(); }
  std::size_t wire_size(const LayerSizes& layers) const { return codec_->wire_size(layout_of(layers)); }

  nb::bytes encode(nb::handle gradient, const LayerSizes& layers) {
    const GradientLayout layout = layout_of(layers);
    const std::span<const float> values = cpu_floats(gradient, "gradient");
    require_size(values.size(), layout, "gradient");
    coding::EncodedGradient encoded;
    {
      nb::gil_scoped_release released;
      const std::lock_guard lock(mutex_);
      encoded = codec_->encode(values, layout, rng_);
    }
    return nb::bytes(encoded.bytes.data(), encoded.bytes.size());
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

  void decode_add(const nb::bytes& data, nb::handle accumulator, const LayerSizes& layers, float weight) const {
    const GradientLayout layout = layout_of(layers);
    const std::span<float> out = cpu_floats_mut(accumulator, "accumulator");
    require_size(out.size(), layout, "accumulator");
    Status status;
    {
      nb::gil_scoped_release released;
      status = codec_->decode_add(byte_view(data), layout, out, weight);
    }
    unwrap(std::move(status));
  }

  nb::bytes save_state() const {
    const std::lock_guard lock(mutex_);
    const std::vector<std::uint8_t> state = codec_->save_state();
    return nb::bytes(state.data(), state.size());
  }
  void load_state(const nb::bytes& state, const LayerSizes& layers) {
    const GradientLayout layout = layout_of(layers);
    const std::lock_guard lock(mutex_);
    unwrap(codec_->load_state(byte_view(state), layout));
  }
  void reset_state() {
    const std::lock_guard lock(mutex_);
    codec_->reset_state();
  }

  // The error-feedback memory e (a copy), or None for a codec without error feedback.
  nb::object memory() const {
    const auto* ef = dynamic_cast<const coding::ErrorFeedback*>(codec_.get());
    if (ef == nullptr) return nb::none();
    std::vector<float> copy;
    {
      const std::lock_guard lock(mutex_);
      copy.assign(ef->memory().begin(), ef->memory().end());
    }
    return nb::cast(to_numpy(std::move(copy)));
  }

  std::uint64_t rng_position() const {
    const std::lock_guard lock(mutex_);
    return rng_.position();
  }

 private:
  std::unique_ptr<coding::Codec> codec_;
  Rng rng_;
  mutable std::mutex mutex_;
};

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
      .def("encode", &NativeCodec::encode, nb::arg("gradient"), nb::arg("layers"))
      .def("decode", &NativeCodec::decode, nb::arg("data"), nb::arg("layers"))
      .def("decode_add", &NativeCodec::decode_add, nb::arg("data"), nb::arg("accumulator"), nb::arg("layers"),
           nb::arg("weight"))
      .def("save_state", &NativeCodec::save_state)
      .def("load_state", &NativeCodec::load_state, nb::arg("state"), nb::arg("layers"))
      .def("reset_state", &NativeCodec::reset_state);
  m.def("codec_names", &coding::codec_names);
  // One valid spec per line of the codec table (coding/codec_registry.h), in table order.
  m.def("codec_examples", [] {
    std::vector<std::string> out;
    for (const coding::CodecEntry& entry : coding::codec_table()) out.emplace_back(entry.example);
    return out;
  });
}

}  // namespace ballot::python
