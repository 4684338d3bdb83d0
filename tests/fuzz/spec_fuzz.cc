// Fuzz target: the spec texts people type (--codec, --rule, --update, --lr, cluster files), each
// through the parser it reaches directly: core/spec.h, then the codec, aggregation-rule,
// pre-aggregator and update-rule registries and the learning-rate schedule. Only components are
// built, never a model or a dataset (whose sizes a spec could make huge). Invariants: nothing
// crashes; a refusal is kInvalidArgument or kPrecondition; whatever is accepted prints a spec()
// that is accepted again and prints the same text (the canonical form round-trips).
#include <cstdint>
#include <string>
#include <string_view>

#include "coding/codec_registry.h"
#include "core/gradient_layout.h"
#include "learning/optimizer.h"
#include "robust/registry.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using ballot::ErrorCode;
using ballot::fuzzing::check;

template <typename Made>
void check_refusal(const Made& made) {
  if (!made.ok())
    check(made.error().code == ErrorCode::kInvalidArgument || made.error().code == ErrorCode::kPrecondition);
}

// An accepted component's spec() builds the same component again.
template <typename Make>
void check_round_trip(const Make& make, std::string_view text) {
  auto first = make(text);
  check_refusal(first);
  if (!first.ok()) return;
  const std::string printed = (*first)->spec();
  auto again = make(printed);
  check(again.ok());
  check((*again)->spec() == printed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ballot;
  if (size > 4096) return 0;  // specs are short; longer inputs only repeat what these cover
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_round_trip([](std::string_view t) { return coding::make_codec(t); }, text);
  check_round_trip([](std::string_view t) { return robust::make_aggregator(t); }, text);
  check_round_trip([](std::string_view t) { return robust::make_pre_aggregator(t); }, text);
  const auto layout = GradientLayout::whole(8);
  check_round_trip([&](std::string_view t) { return learning::make_optimizer(t, layout); }, text);
  auto schedule = learning::LrSchedule::parse(text);
  check_refusal(schedule);
  if (schedule.ok()) {
    auto again = learning::LrSchedule::parse(schedule->spec());
    check(again.ok() && again->spec() == schedule->spec());
  }
  return 0;
}
