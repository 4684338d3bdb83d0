// ballot._native bindings of learning/: Ballot parameter files (learning/parameter_file.h), the one
// reader and writer behind ballot.torch's read_init, export_init and layout_digest.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "learning/parameter_file.h"
#include "python/src/native.h"

namespace ballot::python {
namespace {

std::string hex(const std::array<std::uint8_t, 32>& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (const auto byte : digest) {
    text += kDigits[byte >> 4];
    text += kDigits[byte & 15];
  }
  return text;
}

nb::dict read(const std::string& path) {
  Result<learning::ParameterFile> result = make_error(ErrorCode::kInternal, "not read");
  {
    nb::gil_scoped_release released;
    result = learning::read_parameter_file(path);
  }
  learning::ParameterFile file = unwrap(std::move(result));
  nb::list tensors;
  for (const auto& tensor : file.tensors) {
    nb::list shape;
    for (const auto dim : tensor.shape) shape.append(dim);
    tensors.append(
        nb::make_tuple(nb::bytes(tensor.name.data(), tensor.name.size()).attr("decode")("utf-8", "surrogateescape"),
                       nb::tuple(shape), tensor.offset, tensor.size));
  }
  nb::dict out;
  out["layout_digest"] = hex(learning::layout_digest(file.tensors));
  out["tensors"] = tensors;
  out["values"] = to_numpy(std::move(file.values));
  return out;
}

std::string layout(const std::vector<std::pair<std::string, std::vector<std::uint64_t>>>& named_shapes) {
  std::vector<learning::ParameterTensor> tensors;
  tensors.reserve(named_shapes.size());
  for (const auto& [name, shape] : named_shapes) tensors.push_back({name, shape});
  unwrap(learning::check_parameter_layout(tensors));
  return hex(learning::layout_digest(tensors));
}

void write(const std::string& path, const std::vector<std::pair<std::string, std::vector<std::uint64_t>>>& tensors,
           nb::handle values) {
  learning::ParameterFile file;
  for (const auto& [name, shape] : tensors) file.tensors.push_back({name, shape});
  const auto floats = cpu_floats(values, "values");
  file.values.assign(floats.begin(), floats.end());
  Status written;
  {
    nb::gil_scoped_release released;
    written = learning::write_parameter_file(path, file);
  }
  unwrap(std::move(written));  // raises with the GIL held
}

}  // namespace

void register_learning(nb::module_& m) {
  m.def("read_parameter_file", &read, nb::arg("path"),
        "Reads a Ballot parameter file with the C++ decoder: {'tensors': [(name, shape, offset, size)], "
        "'values': float32 array, 'layout_digest': hex}. ValueError when malformed, FileNotFoundError "
        "when missing.");
  m.def("parameter_layout_digest", &layout, nb::arg("tensors"),
        "The layout digest (hex) of (name, shape) pairs: SHA-256 of their encoded names and shapes. "
        "ValueError when they break the format (names, ranks, dims, counts, duplicates).");
  m.def("write_parameter_file", &write, nb::arg("path"), nb::arg("tensors"), nb::arg("values"),
        "Writes a Ballot parameter file with the C++ encoder: tensors as (name, shape) pairs, values a "
        "1-D float32 array of every tensor's elements. ValueError when the tensors break the format.");
}

}  // namespace ballot::python
