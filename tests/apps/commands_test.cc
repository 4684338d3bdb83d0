// The subcommands of apps/commands.h, through the `ballot` program as a user runs it: exit codes,
// what they print, the files they write, and the errors bad input gets.
#include "apps/commands.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace ballot::apps {
namespace {

struct ProgramRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// A path as one shell word.
std::string quoted(const std::string& path) {
  std::string out = "'";
  for (char c : path) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
std::string quoted(const std::filesystem::path& path) { return quoted(path.string()); }

ProgramRun run_ballot(const std::string& arguments, const std::string& environment = "") {
  const std::string command = environment + " " + quoted(std::string(BALLOT_PROGRAM)) + " " + arguments + " 2>&1";
  ProgramRun result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t got;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, got);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

bool contains(const std::string& text, const std::string& fragment) { return text.find(fragment) != std::string::npos; }

// Writes `text` to `path`, creating its directory; false when it cannot.
bool write_text(const std::filesystem::path& path, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

class Commands : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ballot_commands_test_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(Commands, HelpListsEverySubcommand) {
  const ProgramRun help = run_ballot("--help");
  EXPECT_EQ(help.exit_code, 0) << help.output;
  for (const char* name : {"info", "train", "server", "node", "launch", "code", "evaluate", "keys"}) {
    EXPECT_TRUE(contains(help.output, std::string("\n  ") + name + " ")) << name << "\n" << help.output;
  }
  EXPECT_NE(run_ballot("").exit_code, 0);  // a subcommand is required
  const ProgramRun typo = run_ballot("trian");
  EXPECT_NE(typo.exit_code, 0);
  EXPECT_TRUE(contains(typo.output, "unknown subcommand 'trian' (known: info, train,")) << typo.output;
  const ProgramRun unknown = run_ballot("train --no-such-flag");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_TRUE(contains(unknown.output, "--no-such-flag")) << unknown.output;
}

TEST_F(Commands, InfoNamesTheKernelLevel) {
  const ProgramRun info = run_ballot("info");
  EXPECT_EQ(info.exit_code, 0) << info.output;
  EXPECT_TRUE(contains(info.output, "cpu kernels: ")) << info.output;
}

TEST_F(Commands, KeysMakeAClusterPki) {
  const std::string keys = quoted(dir_ / "keys");  // its parent does not exist yet either
  ProgramRun r = run_ballot("keys init --dir " + keys);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  struct stat directory {};
  ASSERT_EQ(::stat((dir_ / "keys").c_str(), &directory), 0);
  EXPECT_EQ(directory.st_mode & 0777, 0700u);
  ASSERT_EQ(run_ballot("keys issue 0 --role server --dir " + keys).exit_code, 0);
  ASSERT_EQ(run_ballot("keys issue 3 --dir " + keys).exit_code, 0);
  for (const auto& key : {dir_ / "ca" / "ca.key", dir_ / "keys" / "node-0.key", dir_ / "keys" / "node-3.key"}) {
    struct stat info {};
    ASSERT_EQ(::stat(key.c_str(), &info), 0) << key;
    EXPECT_EQ(info.st_mode & 0777, 0600u) << key << ": private keys are owner-only";
  }
  // The CA key stays in its own directory, apart from what the machines receive.
  EXPECT_FALSE(std::filesystem::exists(dir_ / "keys" / "ca.key"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "keys" / "ca.crt"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "ca" / "ca.crt"));
  r = run_ballot("keys init --dir " + quoted(dir_ / "same") + " --ca-dir " + quoted(dir_ / "same"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "must not be the key directory")) << r.output;
  r = run_ballot("keys show " + keys);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "kind:        cluster CA")) << r.output;
  EXPECT_TRUE(contains(r.output, "identity:    server 0")) << r.output;
  EXPECT_TRUE(contains(r.output, "identity:    node 3")) << r.output;

  // Bad input: each error names what is wrong, and nothing is overwritten. The server is id 0 and
  // only it: another pairing would give a certificate no cluster accepts.
  const std::pair<std::string, std::string> refused[] = {
      {"keys init --dir " + keys, "refusing to overwrite"},
      {"keys issue 5 --role bogus --dir " + keys, "unknown role 'bogus'"},
      {"keys show " + quoted(dir_ / "keys" / "missing.crt"), "missing.crt"},
      {"keys issue 0 --role node --dir " + keys, "id 0 is the server's"},
      {"keys issue 6 --role server --dir " + keys, "id 6 is a node's"},
      {"keys issue 4 --dir " + quoted(dir_ / "no-ca") + " --ca-dir " + quoted(dir_ / "no-ca"), "ca.crt"},
  };
  for (const auto& [arguments, expected] : refused) {
    r = run_ballot(arguments);
    EXPECT_NE(r.exit_code, 0) << arguments;
    EXPECT_TRUE(contains(r.output, expected)) << arguments << ": " << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "keys" / "node-5.key"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "keys" / "node-6.key"));
  // "dir/" names the same directory (owner-only as well).
  r = run_ballot("keys init --dir " + quoted(dir_ / "other" / "keys") + "/");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(::stat((dir_ / "other" / "keys").c_str(), &directory), 0);
  EXPECT_EQ(directory.st_mode & 0777, 0700u);
}

// Operator mistakes are refused with what was typed and how to fix them.
TEST_F(Commands, NumbersAreCheckedAsTyped) {
  for (const char* arguments : {"train --rounds -1", "train --nodes -3", "train --deadline-ms 0", "train --seed 1e3",
                                "train --rounds 99999999999999999999", "code --nodes -1"}) {
    ProgramRun r = run_ballot(arguments);
    EXPECT_NE(r.exit_code, 0) << arguments;
    const std::string typed = std::string(arguments).substr(std::string(arguments).rfind(' ') + 1);
    EXPECT_TRUE(contains(r.output, "not '" + typed + "'")) << arguments << ": " << r.output;
    EXPECT_FALSE(contains(r.output, "round ")) << r.output;
  }
  ProgramRun r = run_ballot("node --cluster " + quoted(dir_ / "cluster.json") + " --index -1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "not '-1'")) << r.output;
}

TEST_F(Commands, ClusterFileNamesEveryMissingField) {
  std::filesystem::create_directories(dir_);
  const auto file = dir_ / "cluster.json";
  ASSERT_TRUE(write_text(file, R"({"training": {"nodes": 5}})"));
  for (const char* role : {"server", "node --index 0"}) {
    ProgramRun r = run_ballot(std::string(role) + " --cluster " + quoted(file));
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(contains(r.output, "'server'")) << r.output;
    EXPECT_TRUE(contains(r.output, "'keys'")) << r.output;
    EXPECT_TRUE(contains(r.output, file.string())) << r.output;
    EXPECT_FALSE(contains(r.output, "does not exist")) << r.output;
  }
  ASSERT_TRUE(write_text(
      file, R"({"server": {"host": "127.0.0.1", "port": 1}, "keys": "k", "round_deadline_ms": 0, "training": {}})"));
  ProgramRun r = run_ballot("server --cluster " + quoted(file));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "'round_deadline_ms' must be at least 1")) << r.output;
  EXPECT_TRUE(contains(r.output, file.string())) << r.output;
}

// As ssh does: a private key that group or others can read is refused, and the message says how
// to fix it.
TEST_F(Commands, ReadablePrivateKeyIsRefused) {
  const std::string keys = quoted(dir_ / "keys");
  ASSERT_EQ(run_ballot("keys init --dir " + keys).exit_code, 0);
  ASSERT_EQ(run_ballot("keys issue 0 --role server --dir " + keys).exit_code, 0);
  const auto key = dir_ / "keys" / "node-0.key";
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  const auto file = dir_ / "cluster.json";
  ASSERT_TRUE(write_text(file, R"({"server": {"host": "127.0.0.1", "port": 1}, "keys": ")" + (dir_ / "keys").string() +
                                   R"(", "training": {"nodes": 5, "data": "synthetic"}})"));
  ProgramRun r = run_ballot("server --cluster " + quoted(file));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "readable by group or others (mode 0644)")) << r.output;
  EXPECT_TRUE(contains(r.output, "chmod 600 '" + key.string() + "'")) << r.output;
  // The CA key too: issuing refuses to use one that others can read.
  ASSERT_EQ(::chmod((dir_ / "ca" / "ca.key").c_str(), 0640), 0);
  r = run_ballot("keys issue 2 --dir " + keys);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "chmod 600")) << r.output;
}

TEST_F(Commands, CodeReportsTheCertifiedToleranceAndSearches) {
  ProgramRun r = run_ballot("code deterministic:b=1 --nodes 7 --trials 2000");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "election code: n = 7")) << r.output;
  EXPECT_TRUE(contains(r.output, "replicated; exchange, every input in (a):    b = 1")) << r.output;
  r = run_ballot("code --nodes 5 --search 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // ALGORITHMS.md: the minimum for (n, b) = (5, 1) is 19 ones.
  EXPECT_TRUE(contains(r.output, "n = 5, b = 1: 19 ones")) << r.output;
  r = run_ballot("code nonsense:x=1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "nonsense")) << r.output;
}

// Options are checked before any process starts or any data is read.
TEST_F(Commands, TrainRejectsBadOptionsUpFront) {
  ProgramRun r = run_ballot("train --rule bogus:f=1 --rounds 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "unknown aggregation rule 'bogus'")) << r.output;
  r = run_ballot("train --codec qsgd:s=16 --rounds 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "applies to the gradient path only")) << r.output;
  r = run_ballot("train --nodes 4 --byzantine 2 --rounds 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "b < n/2")) << r.output;
  EXPECT_FALSE(contains(r.output, "round ")) << r.output;
  // Sizes that could only end in an allocation failure are refused by name.
  const std::string tiny = " --simulate --rounds 1 --data synthetic --model logreg";
  for (const auto& [arguments, expected] : std::vector<std::pair<std::string, std::string>>{
           {"train --partition-size 99999999999" + tiny, "partition size must be in [1, 2^24]"},
           {"train --simulate --rounds 1 --data synthetic --model mlp:hidden=999999999/999999999",
            "at most 2^31 are supported"},
           {"train --simulate --rounds 1 --model logreg --data synthetic:examples=99999999999", "examples ≤ 2^28"}}) {
    r = run_ballot(arguments);
    EXPECT_EQ(r.exit_code, 1) << arguments << ": " << r.output;
    EXPECT_TRUE(contains(r.output, expected)) << arguments << ": " << r.output;
  }
  // A metrics file that cannot be written is an error before round 0.
  r = run_ballot("train" + tiny + " --metrics " + quoted(dir_ / "no-such-dir" / "metrics.jsonl"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "metrics: cannot write")) << r.output;
  EXPECT_FALSE(contains(r.output, "round ")) << r.output;
  // Placement names in errors (not the enum's bytes).
  r = run_ballot("train --placement diagonal");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "{replicated,exchange}")) << r.output;
}

// `--config=FILE` is read like `--config FILE`; after `--` the words are the node command's.
TEST_F(Commands, TrainConfigForms) {
  std::filesystem::create_directories(dir_);
  const auto config = dir_ / "five.json";
  ASSERT_TRUE(write_text(config, R"({"training": {"nodes": 5, "rounds": 2, "data": "synthetic", "model": "logreg"}})"));
  ProgramRun r = run_ballot("train --simulate --config=" + quoted(config));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "n = 5 nodes")) << r.output;
  r = run_ballot("train --simulate --rounds 1 --data synthetic --model logreg -- /bin/echo --config " +
                 quoted(dir_ / "missing.json"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "n = 7 nodes")) << r.output;
  // A parameter file whose path the model spec cannot carry.
  const auto comma = dir_ / "a,b.bin";
  ASSERT_TRUE(write_text(comma, ""));
  r = run_ballot("train --simulate --init " + quoted(comma));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "cannot hold this path")) << r.output;
}

// Every cell is in the report, and a failed one makes the command fail.
TEST_F(Commands, EvaluateFailsWhenACellFailed) {
  const auto out = dir_ / "evaluation";
  ProgramRun r = run_ballot(
      "evaluate --attacks reverse --defences signSGD-MV --nodes 3 --byzantine 1 --rounds 2 --data synthetic "
      "--model logreg --update sign:foo=1 --lr constant:lr=0.001 --no-baseline -o " +
      quoted(out));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "1 of 1 cells failed")) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out / "report.md"));
  // Without --lr the default rate of the update is looked up first, which refuses the key at once.
  r = run_ballot(
      "evaluate --attacks reverse --defences signSGD-MV --nodes 3 --byzantine 1 --rounds 2 --data synthetic "
      "--model logreg --update sign:foo=1 --no-baseline -o " +
      quoted(out));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "unknown option 'foo'")) << r.output;
  r = run_ballot("evaluate --attacks , --defences signSGD-MV --rounds 2 -o " + quoted(out));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "names no attack")) << r.output;
  r = run_ballot("evaluate --attacks reverse --defences signSGD-MV --rounds 2 --tune-lr-rounds -1 -o " + quoted(out));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "not '-1'")) << r.output;
}

// The in-process engines write their metrics into --work-dir, and a second run there replaces the
// first run's rows (the cluster's and the simulator's do; lockstep appended).
TEST_F(Commands, InProcessEnginesWriteMetricsIntoTheWorkDirectory) {
  for (const char* engine : {"--lockstep", "--simulate"}) {
    const auto work = dir_ / (std::string("work") + (engine + 2));
    const std::string run = std::string("train ") + engine +
                            " --rounds 3 --nodes 3 --byzantine 0 --partition-size 8 "
                            "--data synthetic:examples=200,features=8,classes=3 --model logreg --eval-every 0 "
                            "--work-dir " +
                            quoted(work);
    for (int attempt = 0; attempt < 2; ++attempt) {
      const ProgramRun r = run_ballot(run);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      std::ifstream metrics(work / "metrics.jsonl");
      ASSERT_TRUE(metrics.good()) << engine << ": no metrics in the work directory";
      std::string line;
      std::size_t rows = 0;
      while (std::getline(metrics, line)) rows += line.empty() ? 0 : 1;
      EXPECT_EQ(rows, 3u) << engine << ", run " << attempt + 1;
    }
  }
}

// On the gradient path `--attackers k` alone means k sign-flipping nodes (the vote path's default
// attack, reverse, does not apply there); a config file's attack is kept. Short simulator runs on
// synthetic data.
TEST_F(Commands, GradientPathAttackDefaults) {
  const std::string small =
      "train --simulate --rule median --rounds 2 --nodes 5 --partition-size 8 "
      "--data synthetic:examples=200,features=8,classes=3 --model logreg --eval-every 0";
  ProgramRun r = run_ballot(small + " --attackers 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "does 'sign_flip'")) << r.output;
  r = run_ballot(small + " --attackers 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "do 'sign_flip'")) << r.output;
  r = run_ballot(small);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "adversary:")) << r.output;

  std::filesystem::create_directories(dir_);
  const auto config = dir_ / "config.json";
  ASSERT_TRUE(write_text(config, R"({"training": {"rule": "median", "attack": "alie", "attackers": 1}})"));
  r = run_ballot(small + " --config " + quoted(config));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "does 'alie'")) << r.output;
  r = run_ballot(small + " --attackers 1 --config " + quoted(config));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "does 'alie'")) << r.output;
}

TEST_F(Commands, LaunchNeedsALauncherRank) {
  const std::string unset = "env -u SLURM_PROCID -u RANK -u OMPI_COMM_WORLD_RANK";
  ProgramRun r = run_ballot("launch --cluster " + quoted(dir_ / "cluster.json"), unset);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "no launcher rank")) << r.output;
  r = run_ballot("launch --cluster " + quoted(dir_ / "cluster.json"), unset + " RANK=abc");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "not a rank or size: RANK='abc'")) << r.output;
  r = run_ballot("launch --cluster " + quoted(dir_ / "cluster.json"), unset + " RANK=0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.output, "cluster.json")) << r.output;
}

}  // namespace
}  // namespace ballot::apps
