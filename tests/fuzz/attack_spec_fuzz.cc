// Fuzz target: the attack-spec and node-list parsers of ballot::attacks on arbitrary bytes (both
// come from the command line and evaluation grids). Must never crash or hang; every error carries
// a message; an accepted spec round-trips through its canonical text (parse(spec()) == value and
// spec() is a fixed point); an accepted node list is ascending, distinct and in range.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "attacks/attack_spec.h"
#include "attacks/targets.h"
#include "tests/fuzz/fuzz_check.h"

namespace {
using ballot::fuzzing::check;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ballot::attacks;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const auto spec = AttackSpec::parse(text);
  if (!spec.ok()) {
    check(!spec.error().message.empty());
  } else {
    const std::string canonical = spec->spec();
    const auto again = AttackSpec::parse(canonical);
    check(again.ok() && *again == *spec && again->spec() == canonical);
    bool seen[5] = {};
    for (const Behaviour& b : spec->behaviours) {
      const auto domain = static_cast<std::size_t>(b.domain());
      check(b.kind != AttackKind::kNone && domain < 5 && !seen[domain]);
      seen[domain] = true;
      check(b.first_round <= b.last_round);
      check(spec->find(b.domain()) == &b);
    }
  }

  const auto one = Behaviour::parse(text);
  if (one.ok()) check(Behaviour::parse(one->spec()).ok() && *Behaviour::parse(one->spec()) == *one);

  const std::size_t n = 1 + size % 64;
  const auto indices = parse_indices(text, n);
  if (!indices.ok()) {
    check(!indices.error().message.empty());
  } else {
    for (std::size_t k = 0; k < indices->size(); ++k) {
      check((*indices)[k] < n);
      if (k > 0) check((*indices)[k - 1] < (*indices)[k]);
    }
  }
  return 0;
}
