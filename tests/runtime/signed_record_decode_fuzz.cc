// Fuzz target: a node's signed record (runtime/signed_record.h) as read back from its disk.
#include <cstddef>
#include <cstdint>

#include "runtime/signed_record.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto decoded = ballot::runtime::decode_signed_record({data, size}, 64);
  if (decoded.ok()) {
    // A decoded record must re-encode to exactly the input: the format has one encoding.
    const auto again = ballot::runtime::encode_signed_record(*decoded);
    if (again.size() != size) __builtin_trap();
    for (std::size_t i = 0; i < size; ++i) {
      if (again[i] != data[i]) __builtin_trap();
    }
  }
  return 0;
}
