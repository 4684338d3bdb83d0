#include "apps/launcher_env.h"

#include <cstdlib>

namespace ballot::apps {
namespace {

// The launchers' variables, innermost launcher first: a job step's processes inherit the
// allocation's variables, so under `sbatch` + `mpirun` every rank sees the same SLURM_PROCID
// (0 in a one-task step) beside its own OMPI_COMM_WORLD_RANK, and under `srun torchrun` the
// same SLURM_PROCID beside torchrun's RANK. mpirun and torchrun never run Slurm inside them.
constexpr struct {
  const char* rank;
  const char* size;
} kLaunchers[] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"RANK", "WORLD_SIZE"}, {"SLURM_PROCID", "SLURM_NTASKS"}};

std::optional<int> number(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 1'000'000) return std::nullopt;
  return static_cast<int>(value);
}

}  // namespace

std::optional<LaunchRank> launch_rank_from_environment() {
  for (const auto& launcher : kLaunchers) {
    if (const auto rank = number(launcher.rank)) {
      LaunchRank result;
      result.rank = *rank;
      result.world_size = number(launcher.size).value_or(0);
      result.source = launcher.rank;
      result.size_source = launcher.size;
      return result;
    }
  }
  return std::nullopt;
}

std::string malformed_launcher_variables() {
  std::string out;
  for (const auto& launcher : kLaunchers) {
    for (const char* name : {launcher.rank, launcher.size}) {
      const char* text = std::getenv(name);
      if (text == nullptr || *text == '\0' || number(name)) continue;  // unset, empty, or a number
      out += std::string(out.empty() ? "" : ", ") + name + "='" + text + "'";
    }
  }
  return out;
}

}  // namespace ballot::apps
