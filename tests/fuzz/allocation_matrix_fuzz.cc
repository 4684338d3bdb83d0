// Fuzz target: AllocationMatrix::parse on arbitrary bytes (a matrix file may come from a user or
// a shared configuration). Must never crash, hang or allocate without bound; a matrix it accepts
// must round-trip through to_text() and survive the analysis and, for small n, the certificate.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "coding/allocation_analysis.h"
#include "coding/allocation_matrix.h"
#include "coding/tolerance.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ballot::coding;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = AllocationMatrix::parse(text);
  if (!parsed.ok()) {
    if (parsed.error().message.empty()) std::abort();
    return 0;
  }
  const AllocationMatrix& g = parsed.value();
  const auto again = AllocationMatrix::parse(g.to_text());
  if (!again.ok() || !(again.value() == g)) std::abort();
  const auto analysis = analyze(g);
  if (analysis.ones != g.ones()) std::abort();
  if (g.n() <= 12) {
    const auto a = max_tolerated_b(g, ThreatModel::kVotesOnly);
    const auto b = max_tolerated_b(g, ThreatModel::kVotesAndSources);
    if (!a.ok() || !b.ok() || a->max_b > b->max_b) std::abort();
  }
  return 0;
}
