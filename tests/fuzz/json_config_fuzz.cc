// Fuzz target: the JSON files an operator or a researcher hands Ballot — cluster files
// (runtime/cluster_config.h) and evaluation grids (evaluation/grid.h) — on arbitrary bytes. Must
// never crash, hang or overflow the stack (nesting is bounded before parsing); every error
// carries a message; an accepted cluster file is written back (to_json) as a file that parses to
// the same text again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "evaluation/grid.h"
#include "runtime/cluster_config.h"
#include "tests/fuzz/fuzz_check.h"

namespace {
using ballot::fuzzing::check;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ballot;
  const std::string text(reinterpret_cast<const char*>(data), size);

  const auto required = runtime::check_required_fields(text);
  if (!required.ok()) check(!required.error().message.empty());
  const auto config = runtime::parse_cluster_config(text);
  if (!config.ok()) {
    check(!config.error().message.empty());
  } else {
    const std::string written = runtime::to_json(*config);
    const auto again = runtime::parse_cluster_config(written);
    check(again.ok() && runtime::to_json(*again) == written);
  }

  const auto grid = evaluation::parse_grid(text);
  if (!grid.ok()) check(!grid.error().message.empty());
  return 0;
}
