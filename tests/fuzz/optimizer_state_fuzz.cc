// Fuzz target: the update rules' checkpointed state (Optimizer::load_state, WorkerMomentum::
// load_state in learning/optimizer.h) on hostile bytes. Input format in state_fuzz_support.h.
// Invariants: nothing crashes or reads out of bounds; a rejected blob leaves the state as it was;
// an accepted one saves to a blob that loads again to the same state.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "core/bit_vector.h"
#include "learning/optimizer.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/state_fuzz_support.h"

namespace {

using ballot::fuzzing::check;

// Loads `bytes` into `rule` (an Optimizer or a WorkerMomentum) and checks the invariants.
template <typename Rule>
void exercise(Rule& rule, std::span<const std::uint8_t> bytes, std::size_t params) {
  const auto before = rule.save_state();
  if (!rule.load_state(bytes, params).ok()) {
    check(rule.save_state() == before);
    return;
  }
  const auto saved = rule.save_state();
  check(rule.load_state(saved, params).ok());
  check(rule.save_state() == saved);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ballot;
  if (size < 2) return 0;
  const char* spec = fuzzing::kOptimizerSpecs[data[0] % fuzzing::kOptimizerSpecs.size()];
  const std::size_t params = fuzzing::kParamCounts[data[1] % fuzzing::kParamCounts.size()];
  const std::span<const std::uint8_t> bytes(data + 2, size - 2);
  // One step first, so that "unchanged" is checked against a state that holds something.
  std::vector<float> direction(params);
  for (std::size_t i = 0; i < params; ++i) direction[i] = static_cast<float>(i % 7) - 3.0f;
  if (spec == nullptr) {
    learning::WorkerMomentum momentum;
    BitVector signs;
    momentum.update(direction, signs);
    exercise(momentum, bytes, params);
    return 0;
  }
  auto rule = learning::make_optimizer(spec, fuzzing::optimizer_layout(params));
  if (!rule.ok()) return 0;  // a rule this layout does not take (ef_sign needs parameters)
  std::vector<float> weights(params, 0.5f);
  (*rule)->step(weights, direction, 0.1);
  exercise(**rule, bytes, params);
  return 0;
}
