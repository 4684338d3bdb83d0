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

// A world size counts processes: 0 is as malformed as "x" (and would read as "not said").
std::optional<int> size_number(const char* name) {
  const auto value = number(name);
  return value && *value >= 1 ? value : std::nullopt;
}

}  // namespace

std::optional<LaunchRank> launch_rank_from_environment() {
  for (const auto& launcher : kLaunchers) {
    if (const auto rank = number(launcher.rank)) {
      LaunchRank result;
      result.rank = *rank;
      result.world_size = size_number(launcher.size).value_or(0);
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
      if (text == nullptr || *text == '\0') continue;  // unset or empty
      if (name == launcher.rank ? number(name).has_value() : size_number(name).has_value()) continue;
      out += std::string(out.empty() ? "" : ", ") + name + "='" + text + "'";
    }
  }
  return out;
}

}  // namespace ballot::apps
