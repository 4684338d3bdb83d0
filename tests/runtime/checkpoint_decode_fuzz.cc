// Fuzz target: checkpoint bytes as a restarting node receives them from the server.
#include <cstddef>
#include <cstdint>

#include "runtime/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ballot::runtime::CheckpointLimits limits;
  limits.max_total_bytes = 1 << 20;
  auto decoded = ballot::runtime::decode_checkpoint({data, size}, limits);
  if (decoded.ok()) {
    // A decoded checkpoint must re-encode to exactly the input: the format has one encoding.
    const auto again = ballot::runtime::encode_checkpoint(*decoded);
    if (again.size() != size) __builtin_trap();
  }
  return 0;
}
