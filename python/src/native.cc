// The `ballot._native` extension module: the checked array views and error translation shared by
// every binding file, and the module definition. Each register_* function lives beside the module
// it binds (bind_robust.cc, …); the Python package (python/ballot) arranges the calls.
#include "python/src/native.h"

#include <Python.h>

#include <memory>
#include <type_traits>

#include "core/config.h"
#if BALLOT_HAVE_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ballot::python {

void raise(const Error& error) {
  const std::string text = error.to_string();
  switch (error.code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kPrecondition:
    case ErrorCode::kMalformed:
    case ErrorCode::kLimitExceeded:
      throw nb::value_error(text.c_str());
    case ErrorCode::kNotFound:
      PyErr_SetString(PyExc_FileNotFoundError, text.c_str());
      throw nb::python_error();
    case ErrorCode::kIo:
      PyErr_SetString(PyExc_OSError, text.c_str());
      throw nb::python_error();
    default:
      PyErr_SetString(PyExc_RuntimeError, text.c_str());
      throw nb::python_error();
  }
}

namespace {

std::string named(const char* what, const std::string& problem) { return std::string(what) + ": " + problem; }

const char* dtype_name(nb::dlpack::dtype t) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(t.code);
  if (code == Code::Float && t.bits == 64) return "float64";
  if (code == Code::Float && t.bits == 16) return "float16";
  if (code == Code::Bfloat) return "bfloat16";
  if (code == Code::Int) return t.bits == 64 ? "int64" : t.bits == 32 ? "int32" : "a signed integer type";
  if (code == Code::UInt) return t.bits == 8 ? "uint8" : "an unsigned integer type";
  if (code == Code::Bool) return "bool";
  if (code == Code::Complex) return "a complex type";
  return "this dtype";
}

template <typename Array>
void require_float32(const Array& array, const char* what) {
  if (array.dtype() != nb::dtype<float>())
    throw nb::type_error(named(what, std::string("expected float32, got ") + dtype_name(array.dtype()) +
                                         " (convert it explicitly, e.g. .astype(numpy.float32) or "
                                         ".float(): Ballot never copies silently)")
                             .c_str());
}

// The inner (last-axis) stride in elements must be 1 unless that axis has at most one element.
template <typename Array>
void require_unit_stride(const Array& array, std::size_t axis, const char* what) {
  if (array.shape(axis) > 1 && array.stride(axis) != 1)
    throw nb::value_error(named(what, "the array is not contiguous along its last axis (stride " +
                                          std::to_string(array.stride(axis)) + "); pass a contiguous copy")
                              .c_str());
}

template <typename Array>
void* first_element(const Array& array) {
  return static_cast<std::uint8_t*>(array.data_handle()) + array.byte_offset();
}

// torch and torch.Tensor once torch is imported (null before: then no argument is a tensor).
// Called with the GIL held (the module is not built free-threaded); the references are kept for
// the life of the process.
struct TorchTypes {
  PyObject* module = nullptr;
  PyObject* tensor = nullptr;
};
const TorchTypes* torch_types() {
  static TorchTypes torch;
  if (torch.tensor == nullptr) {
    PyObject* module = PyImport_GetModule(nb::str("torch").ptr());  // new reference; null if not imported
    if (module == nullptr) {
      PyErr_Clear();
      return nullptr;
    }
    PyObject* tensor = PyObject_GetAttrString(module, "Tensor");
    if (tensor == nullptr || !PyType_Check(tensor)) {  // torch half imported (or not torch at all)
      PyErr_Clear();
      Py_XDECREF(tensor);
      Py_DECREF(module);
      return nullptr;
    }
    torch = {module, tensor};
  }
  return &torch;
}

// What torch refuses and nanobind's DLPack fallback for older torch (torch.utils.dlpack.to_dlpack)
// lets through: a tensor with a lazy negation or conjugation bit would be read without it (the
// wrong values); a write into a tensor that requires grad while grad mode is on is what torch
// refuses for its own in-place updates of a leaf. (Under torch.no_grad() such a write is allowed,
// as torch allows it; Ballot's writes do not bump autograd's version counter.) Null when `object`
// is no tensor or can be viewed.
const char* torch_refusal(nb::handle object, bool writable) {
  const TorchTypes* torch = torch_types();
  if (torch == nullptr) return nullptr;
  const int is_tensor = PyObject_IsInstance(object.ptr(), torch->tensor);
  if (is_tensor < 0) throw nb::python_error();
  if (is_tensor == 0) return nullptr;
  if (nb::cast<bool>(object.attr("is_neg")()) || nb::cast<bool>(object.attr("is_conj")()))
    return "the tensor is a lazily negated or conjugated view; pass t.resolve_neg() or t.resolve_conj()";
  if (writable && nb::cast<bool>(object.attr("requires_grad")) &&
      nb::cast<bool>(nb::handle(torch->module).attr("is_grad_enabled")()))
    return "the tensor requires grad and Ballot writes into it: do it under torch.no_grad(), as torch's own in-place "
           "updates of parameters do";
  return nullptr;
}

template <typename Array>
Array cast_array(nb::handle object, const char* what) {
  if (const char* why = torch_refusal(object, std::is_same_v<Array, WritableArray>))
    throw nb::value_error(named(what, why).c_str());
  Array array;
  if (!nb::try_cast(object, array, /*convert=*/false)) {
    AnyArray read_only;
    if (nb::try_cast(object, read_only, /*convert=*/false))
      throw nb::value_error(named(what, "the array is read-only and Ballot writes into it").c_str());
    throw nb::type_error(named(what,
                               "expected an array or tensor (numpy, torch or any DLPack "
                               "exporter), got " +
                                   std::string(nb::type_name(object.type()).c_str()))
                             .c_str());
  }
  return array;
}

template <typename Array>
std::pair<std::span<float>, Device> floats_1d(const Array& array, const char* what) {
  require_float32(array, what);
  if (array.ndim() != 1)
    throw nb::value_error(
        named(what, "expected a 1-D array, got " + std::to_string(array.ndim()) + " dimensions").c_str());
  const Device device = device_of(array.device_type(), what);
  require_unit_stride(array, 0, what);
  return {{static_cast<float*>(first_element(array)), array.shape(0)}, device};
}

std::span<float> on_cpu(std::pair<std::span<float>, Device> view, const char* what) {
  if (view.second != Device::kCpu)
    throw nb::value_error(named(what, "this operation runs on the CPU; the array is on a CUDA device").c_str());
  return view.first;
}

}  // namespace

Device device_of(int dlpack_device_type, const char* what) {
  if (dlpack_device_type == nb::device::cpu::value) return Device::kCpu;
  if (dlpack_device_type == nb::device::cuda::value) return Device::kCuda;
  throw nb::value_error(named(what, "arrays must live on the CPU or a CUDA device (DLPack device type " +
                                        std::to_string(dlpack_device_type) + ")")
                            .c_str());
}

Status require_current_device(int device_id) {
#if BALLOT_HAVE_CUDA
  const int current = kernels::cuda::current_device();
  if (device_id != current) {
    return make_error(ErrorCode::kInvalidArgument, "the tensor is on cuda:" + std::to_string(device_id) +
                                                       " but the current CUDA device is " + std::to_string(current) +
                                                       " (run under torch.cuda.device(" + std::to_string(device_id) +
                                                       "))");
  }
#else
  (void)device_id;
#endif
  return {};
}

AnyArray as_array(nb::handle object, const char* what) { return cast_array<AnyArray>(object, what); }
WritableArray as_writable(nb::handle object, const char* what) { return cast_array<WritableArray>(object, what); }

std::pair<HeldSpan<float>, Device> floats_on_device(nb::handle object, const char* what, bool writable) {
  ArrayHold hold;
  std::pair<std::span<float>, Device> view;
  if (writable) {
    hold.write = as_writable(object, what);
    view = floats_1d(hold.write, what);
  } else {
    hold.read = as_array(object, what);
    view = floats_1d(hold.read, what);
  }
  return {HeldSpan<float>(view.first, std::move(hold)), view.second};
}

HeldSpan<const float> cpu_floats(nb::handle object, const char* what) {
  ArrayHold hold{as_array(object, what), {}};
  const std::span<const float> span = on_cpu(floats_1d(hold.read, what), what);
  return {span, std::move(hold)};
}

HeldSpan<float> cpu_floats_mut(nb::handle object, const char* what) {
  ArrayHold hold{{}, as_writable(object, what)};
  const std::span<float> span = on_cpu(floats_1d(hold.write, what), what);
  return {span, std::move(hold)};
}

Words words_of(nb::handle object, const char* what, bool writable) {
  ArrayHold hold;
  hold.read = as_array(object, what);
  const AnyArray& array = hold.read;
  if (writable) hold.write = as_writable(object, what);
  const auto t = array.dtype();
  if (t != nb::dtype<std::uint64_t>() && t != nb::dtype<std::int64_t>())
    throw nb::type_error(
        named(what, std::string("expected packed sign words of dtype uint64 or int64, got ") + dtype_name(t)).c_str());
  if (array.ndim() != 1) throw nb::value_error(named(what, "expected a 1-D array of words").c_str());
  require_unit_stride(array, 0, what);
  return {static_cast<std::uint64_t*>(first_element(array)), array.shape(0), device_of(array.device_type(), what),
          array.device_id(), std::move(hold)};
}

FloatRows float_rows(nb::handle vectors, const char* what) {
  FloatRows out;
  const bool is_sequence = nb::isinstance<nb::list>(vectors) || nb::isinstance<nb::tuple>(vectors);
  if (!is_sequence) {
    AnyArray matrix = as_array(vectors, what);
    require_float32(matrix, what);
    if (matrix.ndim() != 2)
      throw nb::value_error(named(what,
                                  "expected a list of 1-D vectors or one 2-D array (rows = "
                                  "vectors), got " +
                                      std::to_string(matrix.ndim()) + " dimensions")
                                .c_str());
    out.device = device_of(matrix.device_type(), what);
    require_unit_stride(matrix, 1, what);
    out.d = matrix.shape(1);
    out.arrays.push_back(matrix);
    const auto* base = static_cast<const float*>(first_element(matrix));
    for (std::size_t i = 0; i < matrix.shape(0); ++i)
      out.rows.push_back(base + static_cast<std::ptrdiff_t>(i) * matrix.stride(0));
    return out;
  }
  const nb::sequence list = nb::borrow<nb::sequence>(vectors);
  const std::size_t n = nb::len(list);
  out.rows.reserve(n);
  out.arrays.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    // The common case — a float32 1-D contiguous CPU or CUDA vector of the right size — is checked
    // without building the element's name; the slow path names it in the error.
    AnyArray row;
    const nb::handle item = list[i];
    const bool fast = torch_refusal(item, false) == nullptr && nb::try_cast(item, row, /*convert=*/false) &&
                      row.dtype() == nb::dtype<float>() && row.ndim() == 1 &&
                      (row.shape(0) <= 1 || row.stride(0) == 1) &&
                      (row.device_type() == nb::device::cpu::value || row.device_type() == nb::device::cuda::value);
    if (!fast) {
      const std::string name = std::string(what) + "[" + std::to_string(i) + "]";
      row = as_array(item, name.c_str());
      require_float32(row, name.c_str());
      if (row.ndim() != 1)
        throw nb::value_error(
            named(name.c_str(), "expected a 1-D vector, got " + std::to_string(row.ndim()) + " dimensions").c_str());
      (void)device_of(row.device_type(), name.c_str());
      require_unit_stride(row, 0, name.c_str());
    }
    const Device device = row.device_type() == nb::device::cpu::value ? Device::kCpu : Device::kCuda;
    if (i == 0) {
      out.d = row.shape(0);
      out.device = device;
    } else if (row.shape(0) != out.d || device != out.device ||
               (device == Device::kCuda && row.device_id() != out.arrays.front().device_id())) {
      const std::string name = std::string(what) + "[" + std::to_string(i) + "]";
      throw nb::value_error(named(name.c_str(), row.shape(0) != out.d
                                                    ? "has " + std::to_string(row.shape(0)) +
                                                          " elements, the first vector " + std::to_string(out.d)
                                                    : std::string("is on another device than the first vector"))
                                .c_str());
    }
    out.rows.push_back(static_cast<const float*>(first_element(row)));
    out.arrays.push_back(std::move(row));
  }
  return out;
}

nb::ndarray<nb::numpy, float, nb::ndim<1>> to_numpy(std::vector<float>&& values) {
  auto* owned = new std::vector<float>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return nb::ndarray<nb::numpy, float, nb::ndim<1>>(owned->data(), {owned->size()}, owner);
}

}  // namespace ballot::python

NB_MODULE(_native, m) {
  namespace py = ballot::python;
  m.doc() =
      "Ballot's C++ core (robust aggregation, codecs, sign kernels, election codes, attacks, "
      "evaluation, the node session, parameter files). Use the pure-Python modules of the `ballot` package rather than "
      "this one.";
  m.attr("has_cuda") = static_cast<bool>(BALLOT_HAVE_CUDA);
  py::register_robust(m);
  py::register_codecs(m);
  py::register_signs(m);
  py::register_election(m);
  py::register_attacks(m);
  py::register_evaluation(m);
  py::register_session(m);
  py::register_learning(m);
}
