// Fuzz target: a file of the colluding attackers' shared directory (attacks/collusion.h
// DirectoryCollusion::decode), written by other processes. Invariants: nothing crashes or
// allocates past what the input holds; an accepted file re-encodes to exactly its bytes.
#include <algorithm>
#include <cstdint>
#include <span>

#include "attacks/collusion.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ballot::attacks::DirectoryCollusion;
  using ballot::fuzzing::check;
  const std::span<const std::uint8_t> bytes(data, size);
  const auto decoded = DirectoryCollusion::decode(bytes, "fuzz");
  if (!decoded.ok()) {
    check(decoded.error().code == ballot::ErrorCode::kMalformed ||
          decoded.error().code == ballot::ErrorCode::kLimitExceeded);
    return 0;
  }
  const auto again = DirectoryCollusion::encode(*decoded);
  check(again.size() == size && std::equal(again.begin(), again.end(), bytes.begin()));
  return 0;
}
