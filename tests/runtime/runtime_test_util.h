// Shared by the runtime tests: small training runs on synthetic data and their setup.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "runtime/training.h"

namespace ballot::runtime::testing {

// What every role builds from `options`: the data, loaded, and the training setup.
inline Result<TrainingSetup> setup_for(const TrainingOptions& options) {
  BALLOT_ASSIGN_OR_RETURN(auto data, load_training_data(options));
  return make_training_setup(options, std::make_shared<const learning::TrainTestSplit>(std::move(data)));
}

// An MLP on 2000 synthetic examples of 4 classes with b = 1: trains in a fraction of a second per
// few dozen rounds, and learns enough for accuracy to mean something.
inline TrainingOptions small_synthetic_run(std::size_t nodes, std::string code, std::uint64_t rounds,
                                           std::uint64_t eval_every) {
  TrainingOptions options;
  options.nodes = nodes;
  options.byzantine = 1;
  options.code = std::move(code);
  options.model = "mlp:hidden=16";
  options.data = "synthetic:examples=2000,features=20,classes=4,separation=2";
  options.lr = "constant:lr=0.01";
  options.rounds = rounds;
  options.eval_every = eval_every;
  options.partition_size = 16;
  return options;
}

// A 5-node run with b = 1 of a small MLP on 500 synthetic examples, without worker momentum:
// enough for one setup, replica or worker to compute in microseconds.
inline TrainingOptions tiny_run() {
  TrainingOptions options;
  options.nodes = 5;
  options.byzantine = 1;
  options.model = "mlp:hidden=8";
  options.data = "synthetic:examples=500,features=12,classes=3";
  options.worker_momentum = 0;
  options.partition_size = 8;
  return options;
}

// setup_for, for options a test knows to be valid.
inline TrainingSetup set_up(const TrainingOptions& options) { return setup_for(options).value(); }

}  // namespace ballot::runtime::testing
