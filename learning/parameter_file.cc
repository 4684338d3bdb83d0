#include "learning/parameter_file.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <system_error>
#include <unordered_set>

#include "core/byte_io.h"
#include "core/enforce.h"
#include "core/file_io.h"

namespace ballot::learning {
namespace {

constexpr std::array<std::uint8_t, 8> kMagic = {'B', 'A', 'L', 'L', 'O', 'T', 'P', '1'};
constexpr std::size_t kDigestBytes = 32;
constexpr const char* kContext = "parameter file";

// The largest valid file: the header at its limits, 2^31 values and the checksum.
constexpr std::uint64_t kMaxFileBytes =
    kMagic.size() + 4 + 4 + kMaxParameterTensors * (2 + kMaxParameterNameBytes + 1 + 8 * kMaxParameterRank) + 8 +
    kMaxParameterElements * sizeof(float) + kDigestBytes;

std::array<std::uint8_t, kDigestBytes> sha256(std::span<const std::uint8_t> bytes) {
  std::array<std::uint8_t, kDigestBytes> digest{};
  unsigned int length = 0;
  const int ok = EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, EVP_sha256(), nullptr);
  BALLOT_ENFORCE(ok == 1 && length == kDigestBytes, "EVP_Digest(SHA256) failed");
  return digest;
}

Error malformed(const std::string& why) {
  return make_error(ErrorCode::kMalformed, std::string(kContext) + ": " + why);
}

std::string tensor_label(std::size_t index, const std::string& name) {
  std::string label = "tensor " + std::to_string(index);
  if (!name.empty() && name.find('\0') == std::string::npos && name.size() <= kMaxParameterNameBytes) {
    label += " ('" + name + "')";
  }
  return label;
}

// Checks one tensor's name and shape against the format; returns its element count.
Result<std::uint64_t> check_tensor(std::size_t index, const std::string& name, std::span<const std::uint64_t> shape) {
  const std::string label = tensor_label(index, name);
  if (name.empty() || name.size() > kMaxParameterNameBytes) {
    return malformed(label + ": name length " + std::to_string(name.size()) + " is not in 1.." +
                     std::to_string(kMaxParameterNameBytes));
  }
  if (name.find('\0') != std::string::npos) return malformed(label + ": the name holds a NUL byte");
  if (shape.size() > kMaxParameterRank) {
    return malformed(label + ": rank " + std::to_string(shape.size()) + " is above " +
                     std::to_string(kMaxParameterRank));
  }
  std::uint64_t elements = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0 || shape[d] > kMaxParameterElements) {
      return malformed(label + ": dim " + std::to_string(d) + " is " + std::to_string(shape[d]) + ", not in 1..2^31");
    }
    // Both factors are at most 2^31, so the product cannot overflow before it is compared.
    elements *= shape[d];
    if (elements > kMaxParameterElements) return malformed(label + ": more than 2^31 elements");
  }
  return elements;
}

Status check_count(std::size_t count) {
  if (count == 0 || count > kMaxParameterTensors) {
    return malformed("tensor count " + std::to_string(count) + " is not in 1.." + std::to_string(kMaxParameterTensors));
  }
  return {};
}

// T and every tensor's record: the bytes the layout digest covers.
void put_layout(ByteWriter& out, std::span<const ParameterTensor> tensors) {
  out.put(static_cast<std::uint32_t>(tensors.size()));
  for (const auto& tensor : tensors) {
    out.put(static_cast<std::uint16_t>(tensor.name.size()));
    out.put_bytes({reinterpret_cast<const std::uint8_t*>(tensor.name.data()), tensor.name.size()});
    out.put(static_cast<std::uint8_t>(tensor.shape.size()));
    out.put_array(std::span<const std::uint64_t>(tensor.shape));
  }
}

// Adds the tensor index and name to a truncation error of the ByteReader.
Error in_tensor(Error error, std::size_t index) {
  error.message += " (tensor " + std::to_string(index) + ")";
  return error;
}

}  // namespace

std::array<std::uint8_t, 32> layout_digest(std::span<const ParameterTensor> tensors) {
  BALLOT_ENFORCE(tensors.size() <= UINT32_MAX, "too many tensors for a parameter file");
  for (const auto& tensor : tensors) {
    BALLOT_ENFORCE(tensor.name.size() <= UINT16_MAX && tensor.shape.size() <= UINT8_MAX,
                   "tensor '" + tensor.name + "' has a name or rank a parameter file cannot encode");
  }
  ByteWriter out;
  put_layout(out, tensors);
  return sha256(out.bytes());
}

Result<std::uint64_t> check_parameter_layout(std::span<const ParameterTensor> tensors) {
  BALLOT_TRY(check_count(tensors.size()));
  std::unordered_set<std::string_view> names;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& tensor = tensors[i];
    BALLOT_ASSIGN_OR_RETURN(const auto elements, check_tensor(i, tensor.name, tensor.shape));
    if (!names.insert(tensor.name).second) return malformed(tensor_label(i, tensor.name) + ": duplicate name");
    total += elements;
  }
  if (total > kMaxParameterElements) return malformed("more than 2^31 elements in all");
  return total;
}

Result<std::vector<std::uint8_t>> encode_parameter_file(const ParameterFile& file) {
  BALLOT_ASSIGN_OR_RETURN(const auto total, check_parameter_layout(file.tensors));
  if (file.values.size() != total) {
    return malformed(std::to_string(file.values.size()) + " values for tensors of " + std::to_string(total) +
                     " elements");
  }
  ByteWriter out;
  out.put_array(std::span<const std::uint8_t>(kMagic));
  out.put(kParameterFileVersion);
  put_layout(out, file.tensors);
  out.put(total);
  out.put_array(std::span<const float>(file.values));
  const auto digest = sha256(out.bytes());
  out.put_array(std::span<const std::uint8_t>(digest));
  return out.take();
}

Result<ParameterFile> decode_parameter_file(std::span<const std::uint8_t> bytes) {
  ByteReader reader(bytes, kContext);
  BALLOT_ASSIGN_OR_RETURN(const auto magic, reader.take_bytes(kMagic.size(), "magic"));
  if (!std::equal(magic.begin(), magic.end(), kMagic.begin())) return malformed("bad magic (not \"BALLOTP1\")");
  BALLOT_ASSIGN_OR_RETURN(const auto version, reader.read<std::uint32_t>("format version"));
  if (version != kParameterFileVersion) {
    return malformed("format version " + std::to_string(version) + " (this build reads version " +
                     std::to_string(kParameterFileVersion) + ")");
  }
  BALLOT_ASSIGN_OR_RETURN(const auto count, reader.read<std::uint32_t>("tensor count"));
  BALLOT_TRY(check_count(count));

  ParameterFile file;
  // Every record takes at least 4 bytes (a 1-byte name), so `count` is bounded by the input.
  if (count > reader.remaining() / 4) return malformed("tensor count " + std::to_string(count) + " exceeds the file");
  file.tensors.reserve(count);
  std::unordered_set<std::string> names;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < count; ++i) {
    ParameterTensor tensor;
    auto length = reader.read<std::uint16_t>("tensor name length");
    if (!length.ok()) return in_tensor(std::move(length).error(), i);
    auto name = reader.take_bytes(*length, "tensor name");
    if (!name.ok()) return in_tensor(std::move(name).error(), i);
    tensor.name.assign(name->begin(), name->end());
    auto rank = reader.read<std::uint8_t>("tensor rank");
    if (!rank.ok()) return in_tensor(std::move(rank).error(), i);
    if (*rank > kMaxParameterRank) {
      return malformed(tensor_label(i, tensor.name) + ": rank " + std::to_string(*rank) + " is above " +
                       std::to_string(kMaxParameterRank));
    }
    auto dims = reader.read_array<std::uint64_t>(*rank, "tensor dims");
    if (!dims.ok()) return in_tensor(std::move(dims).error(), i);
    tensor.shape = std::move(dims).value();
    BALLOT_ASSIGN_OR_RETURN(const auto elements, check_tensor(i, tensor.name, tensor.shape));
    if (!names.insert(tensor.name).second) return malformed(tensor_label(i, tensor.name) + ": duplicate name");
    tensor.offset = static_cast<std::size_t>(total);
    tensor.size = static_cast<std::size_t>(elements);
    total += elements;  // at most 65536 · 2^31: no overflow
    file.tensors.push_back(std::move(tensor));
  }
  BALLOT_ASSIGN_OR_RETURN(const auto declared, reader.read<std::uint64_t>("element count"));
  if (declared != total) {
    return malformed("element count " + std::to_string(declared) + " differs from the tensors' " +
                     std::to_string(total));
  }
  if (total == 0 || total > kMaxParameterElements) {
    return malformed("element count " + std::to_string(total) + " is not in 1..2^31");
  }
  BALLOT_ASSIGN_OR_RETURN(file.values, reader.read_array<float>(static_cast<std::size_t>(total), "values"));
  const std::size_t covered = reader.position();
  BALLOT_ASSIGN_OR_RETURN(const auto stored, reader.take_bytes(kDigestBytes, "checksum"));
  BALLOT_TRY(reader.expect_end());
  const auto digest = sha256(bytes.first(covered));
  if (!std::equal(digest.begin(), digest.end(), stored.begin())) {
    return malformed("checksum (SHA-256) does not match the contents");
  }
  return file;
}

Result<ParameterFile> read_parameter_file(const std::filesystem::path& path) {
  BALLOT_ASSIGN_OR_RETURN(const auto bytes, read_file(path, kMaxFileBytes, "parameter file"));
  auto file = decode_parameter_file(bytes);
  if (!file.ok()) {
    auto error = std::move(file).error();
    error.message += " in '" + path.string() + "'";
    return error;
  }
  return file;
}

Status write_parameter_file(const std::filesystem::path& path, const ParameterFile& file) {
  BALLOT_ASSIGN_OR_RETURN(const auto bytes, encode_parameter_file(file));
  return write_file_atomically(path, bytes, 0644);  // an init file is shared, not secret
}

}  // namespace ballot::learning
