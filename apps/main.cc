// ballot — the command-line program. Subcommands parse options and call the library.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "core/config.h"
#include "kernels/isa.h"

namespace {

int run_info() {
  std::printf("ballot %s\n", BALLOT_VERSION_STRING);
  std::printf("cpu kernels: %.*s (supported:", static_cast<int>(ballot::kernels::isa_name(ballot::kernels::active_isa()).size()),
              ballot::kernels::isa_name(ballot::kernels::active_isa()).data());
  for (auto isa : ballot::kernels::supported_isas()) {
    const auto name = ballot::kernels::isa_name(isa);
    std::printf(" %.*s", static_cast<int>(name.size()), name.data());
  }
  std::printf(")\ncuda kernels built: %s\nnccl built: %s\n", BALLOT_HAVE_CUDA ? "yes" : "no",
              BALLOT_HAVE_NCCL ? "yes" : "no");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Ballot: Byzantine-robust, communication-efficient distributed training"};
  app.require_subcommand(1);
  auto* info = app.add_subcommand("info", "Print the build configuration and the CPU kernel level");
  CLI11_PARSE(app, argc, argv);
  if (info->parsed()) return run_info();
  return 0;
}
