// Writes the seed corpora of the optimizer_state and node_state fuzz targets
// (tests/fuzz/optimizer_state_fuzz.cc, node_state_fuzz.cc): the states every update rule and the
// worker momentum save after a few steps, for each parameter count of the target, and the node
// state files of a small vote run after a few rounds. Deterministic (fixed data, seeds and
// directions), so `--check` verifies the committed corpora (ctest fuzz_state_corpus_current).
//   state_corpus_gen OPTIMIZER_DIR NODE_DIR          write the files
//   state_corpus_gen --check OPTIMIZER_DIR NODE_DIR  exit 1 if any file is missing or different
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/bit_vector.h"
#include "learning/optimizer.h"
#include "runtime/node_worker.h"
#include "runtime/replica.h"
#include "runtime/training.h"
#include "tests/fuzz/corpus_seeds.h"
#include "tests/fuzz/state_fuzz_support.h"

namespace {

using namespace ballot;
using fuzzing::CorpusSeed;

std::string file_name(const char* spec) {
  std::string name = spec == nullptr ? "worker_momentum" : spec;
  for (char& c : name) {
    if (c == ':' || c == '=' || c == ',') c = '_';
  }
  return name;
}

std::vector<std::uint8_t> direction(std::size_t params, int step) {
  std::vector<float> values(params);
  for (std::size_t i = 0; i < params; ++i) values[i] = static_cast<float>((i * 5 + step * 3) % 11) - 5.0f;
  std::vector<std::uint8_t> bytes(params * sizeof(float));
  if (params != 0) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> floats(const std::vector<std::uint8_t>& bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

// The state of rule `index` after `steps` steps on `params` coordinates, behind the selector bytes.
std::vector<std::uint8_t> optimizer_seed(std::size_t index, std::size_t count_index, int steps) {
  const char* spec = fuzzing::kOptimizerSpecs[index];
  const std::size_t params = fuzzing::kParamCounts[count_index];
  std::vector<std::uint8_t> seed = {static_cast<std::uint8_t>(index), static_cast<std::uint8_t>(count_index)};
  std::vector<std::uint8_t> state;
  if (spec == nullptr) {
    learning::WorkerMomentum momentum;
    BitVector signs;
    for (int s = 0; s < steps; ++s) momentum.update(floats(direction(params, s)), signs);
    state = momentum.save_state();
  } else {
    auto rule = learning::make_optimizer(spec, fuzzing::optimizer_layout(params)).value();
    std::vector<float> weights(params, 0.25f);
    for (int s = 0; s < steps; ++s) rule->step(weights, floats(direction(params, s)), 0.05);
    state = rule->save_state();
  }
  seed.insert(seed.end(), state.begin(), state.end());
  return seed;
}

std::vector<CorpusSeed> optimizer_seeds() {
  std::vector<CorpusSeed> seeds;
  for (std::size_t i = 0; i < fuzzing::kOptimizerSpecs.size(); ++i) {
    const auto name = file_name(fuzzing::kOptimizerSpecs[i]);
    seeds.push_back({name + "-fresh", optimizer_seed(i, 2, 0)});
    for (std::size_t c = 1; c < fuzzing::kParamCounts.size(); ++c) {
      seeds.push_back({name + "-" + std::to_string(fuzzing::kParamCounts[c]), optimizer_seed(i, c, 2)});
    }
  }
  return seeds;
}

std::vector<CorpusSeed> node_seeds() {
  const auto options = fuzzing::node_state_run();
  auto data = runtime::load_training_data(options).value();
  const auto setup =
      runtime::make_training_setup(options, std::make_shared<const learning::TrainTestSplit>(std::move(data))).value();
  auto replica = runtime::Replica::create(setup).value();
  std::vector<CorpusSeed> seeds;
  runtime::NodeWorker worker(setup, 0);
  seeds.push_back({"node0-fresh", worker.save_state()});
  BitVector vote;
  for (std::uint64_t round = 0; round < 2; ++round) {
    worker.vote(replica, round, vote);
    replica.apply(round, vote);
    seeds.push_back({"node0-round" + std::to_string(round + 1), worker.save_state()});
  }
  return seeds;
}

}  // namespace

int main(int argc, char** argv) {
  const bool check = argc == 4 && std::strcmp(argv[1], "--check") == 0;
  if (argc != 3 && !check) {
    std::fprintf(stderr, "usage: %s [--check] OPTIMIZER_DIR NODE_DIR\n", argv[0]);
    return 2;
  }
  // write_or_check_corpus takes `[--check] DIR`: once per corpus.
  const int flags = check ? 2 : 1;
  char* optimizer_args[] = {argv[0], argv[1], argv[argc - 2]};
  char* node_args[] = {argv[0], argv[1], argv[argc - 1]};
  if (!check) node_args[1] = argv[argc - 1];
  if (!check) optimizer_args[1] = argv[argc - 2];
  const int optimizer = fuzzing::write_or_check_corpus(flags + 1, optimizer_args, optimizer_seeds());
  const int node = fuzzing::write_or_check_corpus(flags + 1, node_args, node_seeds());
  return optimizer != 0 ? optimizer : node;
}
