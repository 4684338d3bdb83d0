// The one place Ballot reads the environment: the rank of this process when an existing launcher
// started it (Slurm, torchrun-style, Open MPI). Rank 0 is the server, rank k > 0 is node k − 1.
#pragma once

#include <optional>
#include <string>

namespace ballot::apps {

struct LaunchRank {
  int rank = 0;
  int world_size = 0;       // 0 when the launcher does not say
  std::string source;       // "OMPI_COMM_WORLD_RANK", "RANK" or "SLURM_PROCID"
  std::string size_source;  // its size variable: "OMPI_COMM_WORLD_SIZE", "WORLD_SIZE" or "SLURM_NTASKS"
  // torchrun's MASTER_ADDR / MASTER_PORT are not read: the server's address is the cluster file's
  // (under torchrun's static rendezvous its agent holds that port).
};

// Reads, innermost launcher first, OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (mpirun, also inside
// a Slurm allocation), RANK/WORLD_SIZE (torchrun-style, also under srun), SLURM_PROCID/
// SLURM_NTASKS. Nothing set (or not a number): nullopt.
std::optional<LaunchRank> launch_rank_from_environment();

// The launcher variables that are set but not a rank or size ("NAME='value'", comma-separated;
// empty when none), for the error or warning that says why a rank or size was not read.
std::string malformed_launcher_variables();

}  // namespace ballot::apps
