// Shared plumbing of the `ballot._native` extension module: turning Ballot's Result errors into
// Python exceptions, and checked zero-copy views of arrays that arrive through DLPack or the
// buffer protocol (numpy arrays, torch tensors, anything exporting `__dlpack__`).
//
// Views never copy and never convert: a wrong dtype is a TypeError, a wrong shape, a strided
// (non-unit inner stride) array or a device this build cannot reach is a ValueError, each naming
// the argument. The memory stays owned by the caller's array, which the Python layer keeps alive
// for the duration of the call.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace ballot::python {

namespace nb = nanobind;

// Raises the Python exception for an error code: ValueError for bad arguments and bytes,
// FileNotFoundError for kNotFound, OSError for kIo, RuntimeError otherwise; the message is Error::to_string().
[[noreturn]] void raise(const Error& error);

template <typename T>
T unwrap(Result<T> result) {
  if (!result.ok()) raise(result.error());
  return std::move(result).value();
}
inline void unwrap(Status status) {
  if (!status.ok()) raise(status.error());
}

// Any array, as DLPack sees it (no conversion: the caller's memory or an error). Read-only
// arrays are accepted where Ballot only reads; outputs must be writable.
using AnyArray = nb::ndarray<nb::ro>;
using WritableArray = nb::ndarray<>;
AnyArray as_array(nb::handle object, const char* what);
WritableArray as_writable(nb::handle object, const char* what);

enum class Device { kCpu, kCuda };
// The device of a DLPack device type (array.device_type()); any other than the CPU or CUDA is a
// ValueError naming `what`.
Device device_of(int dlpack_device_type, const char* what);

// The import of a caller's array (its buffer export or DLPack capsule): while it lives, the memory
// stays where it is — a resizable exporter (array.array, bytearray) refuses to resize instead of
// moving it under a call that released the GIL. (A torch tensor's resize_() from another thread
// cannot be stopped this way: do not resize a tensor a Ballot call is using.) Made and dropped
// with the GIL held.
struct ArrayHold {
  AnyArray read;
  WritableArray write;
};
// A span into a caller's array and the hold on it. Keep it, not a std::span sliced from it, for as
// long as the span is used.
template <typename T>
struct HeldSpan : std::span<T> {
  HeldSpan() = default;
  HeldSpan(std::span<T> span, ArrayHold hold) : std::span<T>(span), hold(std::move(hold)) {}
  ArrayHold hold;
};

// A 1-D float32 array with unit stride (or at most one element) on the CPU.
HeldSpan<const float> cpu_floats(nb::handle object, const char* what);
HeldSpan<float> cpu_floats_mut(nb::handle object, const char* what);
// The same on any device (CPU or CUDA): the device is returned beside the span.
std::pair<HeldSpan<float>, Device> floats_on_device(nb::handle object, const char* what, bool writable);

// A 1-D array of 64-bit words (uint64 or int64: torch has no uint64 tensors), unit stride.
struct Words {
  std::uint64_t* data = nullptr;
  std::size_t count = 0;
  Device device = Device::kCpu;
  int device_id = 0;
  ArrayHold hold;
};
Words words_of(nb::handle object, const char* what, bool writable);

// Float32 rows: a list of 1-D arrays, or the rows of one 2-D array whose inner stride is 1
// (any row stride: a column slice is read in place). Throws on any mismatch.
struct FloatRows {
  std::vector<AnyArray> arrays;  // references that keep the memory alive while the GIL is released
  std::vector<const float*> rows;
  std::size_t d = 0;
  Device device = Device::kCpu;
};
FloatRows float_rows(nb::handle vectors, const char* what);

// kInvalidArgument unless `device_id` is the current CUDA device (allocations and launches go to
// the current device; torch keeps its own): names the tensor's device and the fix. Always OK in a
// build without CUDA.
Status require_current_device(int device_id);

// A new 1-D numpy float32 array that owns `values` (moved, not copied).
nb::ndarray<nb::numpy, float, nb::ndim<1>> to_numpy(std::vector<float>&& values);

void register_robust(nb::module_& m);
void register_codecs(nb::module_& m);
void register_signs(nb::module_& m);
void register_election(nb::module_& m);
void register_attacks(nb::module_& m);
void register_evaluation(nb::module_& m);
void register_session(nb::module_& m);
void register_learning(nb::module_& m);

}  // namespace ballot::python
