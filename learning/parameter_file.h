// Ballot parameter files: a model's named float32 tensors, the "init file" from which a node or
// the server builds a parameters-only model (learning/parameter_model.h) without any model code.
// Written by Python (ballot.torch.export_init) and by C++; never pickle.
//
// Format (every integer little-endian):
//   8 bytes   magic "BALLOTP1"
//   u32       format version = 1
//   u32       T, the tensor count (1 .. 65536)
//   T times:  u16 name length L (1 .. 1024), L name bytes (no NUL; UTF-8 is not checked),
//             u8 rank R (0 .. 8), R × u64 dims (each 1 .. 2^31; rank 0 is a scalar of 1 element)
//   u64       D, the element count: the sum over tensors of the product of their dims, 1 .. 2^31
//   D × f32   the values, tensor after tensor in the order above, contiguous
//   32 bytes  SHA-256 of every byte before it
// Names are unique. A tensor's elements are row-major (PyTorch's contiguous order).
//
// The layout digest is the SHA-256 of the bytes from T through the last tensor's dims: names and
// shapes, not values. Two models with the same parameter names and shapes in the same order have
// the same layout digest whatever their values.
//
// Errors: every violation of the format is kMalformed naming the tensor (index and name) and the
// field; sizes are checked against the remaining bytes before anything is allocated. Decoding is
// O(file size); nothing here keeps state, so every function is thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"

namespace ballot::learning {

inline constexpr std::uint32_t kParameterFileVersion = 1;
inline constexpr std::size_t kMaxParameterTensors = 65536;
inline constexpr std::size_t kMaxParameterNameBytes = 1024;
inline constexpr std::size_t kMaxParameterRank = 8;
inline constexpr std::uint64_t kMaxParameterElements = std::uint64_t{1} << 31;  // per dim and in all

struct ParameterTensor {
  std::string name;
  std::vector<std::uint64_t> shape;  // empty: a scalar
  std::size_t offset = 0;            // first element in ParameterFile::values (filled by decoding)
  std::size_t size = 0;              // the product of `shape` (filled by decoding)

  friend bool operator==(const ParameterTensor&, const ParameterTensor&) = default;
};

struct ParameterFile {
  std::vector<ParameterTensor> tensors;
  std::vector<float> values;  // every tensor's elements, in order
};

// SHA-256 of the encoded names and shapes (T and every tensor's record). Precondition
// (BALLOT_ENFORCE): the records are encodable, i.e. at most 2^32 − 1 tensors, names under 64 KiB
// and ranks under 256; the format's tighter limits are checked by encoding, not here.
std::array<std::uint8_t, 32> layout_digest(std::span<const ParameterTensor> tensors);

// Checks names and shapes against every rule of the format (kMalformed naming the tensor and
// field); returns D, the element count.
Result<std::uint64_t> check_parameter_layout(std::span<const ParameterTensor> tensors);

// Encodes `file` after checking it against every rule of the format and values.size() == D
// (kMalformed naming the tensor and field). The tensors' offset and size are not read.
Result<std::vector<std::uint8_t>> encode_parameter_file(const ParameterFile& file);

// Decodes and checks a whole file (trailing bytes are an error); fills each tensor's offset and size.
Result<ParameterFile> decode_parameter_file(std::span<const std::uint8_t> bytes);

// Reads and decodes a file. A missing file is kNotFound naming the path; a file larger than the
// largest valid one (8 GiB of values plus the largest header) is kLimitExceeded before it is
// read; decoding errors name the path.
Result<ParameterFile> read_parameter_file(const std::filesystem::path& path);

// Encodes `file` and writes it atomically (core/file_io.h write_file_atomically: a temporary file
// beside it, renamed onto `path`), so that a reader never sees half a file. Encoding errors as encode_parameter_file;
// the OS's as kIo.
Status write_parameter_file(const std::filesystem::path& path, const ParameterFile& file);

}  // namespace ballot::learning
