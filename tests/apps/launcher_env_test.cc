#include "apps/launcher_env.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace ballot::apps {
namespace {

// Clears every variable the reader looks at, before and after each test.
class LauncherEnvironment : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* name : {"SLURM_PROCID", "SLURM_NTASKS", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
      ::unsetenv(name);
    }
  }
  static void set(const char* name, const char* value) { ::setenv(name, value, 1); }
};

TEST_F(LauncherEnvironment, NothingSetIsNoRank) {
  EXPECT_FALSE(launch_rank_from_environment().has_value());
  EXPECT_EQ(malformed_launcher_variables(), "");
  set("RANK", "");  // set but empty: as unset
  EXPECT_EQ(malformed_launcher_variables(), "");
}

TEST_F(LauncherEnvironment, TorchrunStyle) {
  set("RANK", "3");
  set("WORLD_SIZE", "8");
  set("MASTER_ADDR", "10.0.0.1");
  set("MASTER_PORT", "29500");
  const auto rank = launch_rank_from_environment();
  ASSERT_TRUE(rank.has_value());
  EXPECT_EQ(rank->rank, 3);
  EXPECT_EQ(rank->world_size, 8);
  EXPECT_EQ(rank->source, "RANK");
}

// The innermost launcher wins: under `sbatch` + `mpirun` every MPI rank inherits the batch step's
// SLURM_PROCID (0), and under `srun torchrun` every torchrun rank its task's.
TEST_F(LauncherEnvironment, OpenMpiComesFirstThenRankThenSlurm) {
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "4");
  auto rank = launch_rank_from_environment();
  ASSERT_TRUE(rank.has_value());
  EXPECT_EQ(rank->source, "SLURM_PROCID");
  EXPECT_EQ(rank->size_source, "SLURM_NTASKS");
  EXPECT_EQ(rank->rank, 0);
  EXPECT_EQ(rank->world_size, 4);
  set("RANK", "2");
  set("WORLD_SIZE", "4");
  rank = launch_rank_from_environment();
  ASSERT_TRUE(rank.has_value());
  EXPECT_EQ(rank->source, "RANK");
  EXPECT_EQ(rank->rank, 2);
  set("OMPI_COMM_WORLD_RANK", "3");
  set("OMPI_COMM_WORLD_SIZE", "4");
  rank = launch_rank_from_environment();
  ASSERT_TRUE(rank.has_value());
  EXPECT_EQ(rank->source, "OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(rank->size_source, "OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(rank->rank, 3);
  EXPECT_EQ(rank->world_size, 4);
}

// A value that is not a plain non-negative number is ignored, never half-read: "3x" is not rank 3.
TEST_F(LauncherEnvironment, MalformedValuesAreIgnored) {
  for (const char* bad : {"", "x", "3x", "-1", "2.5", "99999999999"}) {
    set("RANK", bad);
    EXPECT_FALSE(launch_rank_from_environment().has_value()) << "RANK='" << bad << "'";
  }
  set("RANK", "1");
  set("WORLD_SIZE", "many");
  set("MASTER_PORT", "http");
  const auto rank = launch_rank_from_environment();
  ASSERT_TRUE(rank.has_value());
  EXPECT_EQ(rank->world_size, 0);  // unknown, and named for the warning
  EXPECT_EQ(malformed_launcher_variables(), "WORLD_SIZE='many'");
  set("WORLD_SIZE", "0");  // no launcher starts zero processes
  EXPECT_EQ(launch_rank_from_environment()->world_size, 0);
  EXPECT_EQ(malformed_launcher_variables(), "WORLD_SIZE='0'");
  set("WORLD_SIZE", "many");
  // A malformed Open MPI rank falls through to the next launcher.
  set("OMPI_COMM_WORLD_RANK", "abc");
  const auto fallback = launch_rank_from_environment();
  ASSERT_TRUE(fallback.has_value());
  EXPECT_EQ(fallback->source, "RANK");
  EXPECT_EQ(malformed_launcher_variables(), "OMPI_COMM_WORLD_RANK='abc', WORLD_SIZE='many'");
}

}  // namespace
}  // namespace ballot::apps
