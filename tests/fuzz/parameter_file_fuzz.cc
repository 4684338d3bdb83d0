// Fuzz target: Ballot parameter files (learning/parameter_file.h decode_parameter_file), the init
// files a node or the server reads. Invariants: nothing crashes, reads out of bounds or allocates
// past what the input holds; an accepted file satisfies every rule of the format (names unique,
// offsets contiguous, sizes the products of the shapes) and re-encodes to exactly the same bytes.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <span>
#include <string>

#include "learning/parameter_file.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using ballot::fuzzing::check;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ballot;
  const std::span<const std::uint8_t> bytes(data, size);
  const auto decoded = learning::decode_parameter_file(bytes);
  if (!decoded.ok()) {
    check(decoded.error().code == ErrorCode::kMalformed);
    return 0;
  }
  const auto& file = *decoded;
  check(!file.tensors.empty() && file.tensors.size() <= learning::kMaxParameterTensors);
  std::set<std::string> names;
  std::size_t offset = 0;
  for (const auto& tensor : file.tensors) {
    check(!tensor.name.empty() && names.insert(tensor.name).second);
    check(tensor.shape.size() <= learning::kMaxParameterRank);
    std::size_t elements = 1;
    for (auto dim : tensor.shape) elements *= static_cast<std::size_t>(dim);
    check(tensor.offset == offset && tensor.size == elements);
    offset += elements;
  }
  check(offset == file.values.size());
  const auto encoded = learning::encode_parameter_file(file);
  check(encoded.ok());
  check(encoded->size() == size && std::equal(encoded->begin(), encoded->end(), bytes.begin()));
  return 0;
}
