#include "apps/launcher_env.h"

#include <cstdlib>

namespace ballot::apps {
namespace {

// The launchers' variables, in the order they are tried.
constexpr struct {
  const char* rank;
  const char* size;
} kLaunchers[] = {
    {"SLURM_PROCID", "SLURM_NTASKS"}, {"RANK", "WORLD_SIZE"}, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}};

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
