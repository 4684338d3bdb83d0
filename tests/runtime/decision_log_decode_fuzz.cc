// Fuzz target: a server's decision log (runtime/decision_log.h) as read back from its disk.
// Invariants: nothing crashes or reads out of bounds; the records kept are consecutive rounds
// from the header's first round, and the kept prefix re-encodes to exactly the input's bytes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/decision_log.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto decoded = ballot::runtime::decode_decision_log({data, size});
  if (!decoded.ok()) return 0;
  std::vector<std::uint8_t> again = ballot::runtime::encode_decision_log_header(decoded->first_round);
  for (std::size_t i = 0; i < decoded->decisions.size(); ++i) {
    const auto& decision = decoded->decisions[i];
    if (decision.round != decoded->first_round + i) __builtin_trap();
    const auto record = ballot::runtime::encode_decision_record(decision.round, decision.payload);
    again.insert(again.end(), record.begin(), record.end());
  }
  if (again.size() + decoded->dropped_bytes != size) __builtin_trap();
  for (std::size_t i = 0; i < again.size(); ++i) {
    if (again[i] != data[i]) __builtin_trap();
  }
  return 0;
}
