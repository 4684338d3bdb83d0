// The fuzz inputs of the optimizer-state and node-state targets, shared with their seed-corpus
// generator (tests/fuzz/state_corpus_gen.cc): what each byte selects and the fixed objects the
// bytes are loaded into.
//
// optimizer_state: byte 0 selects the update rule (kOptimizerSpecs, the last entry being the
// worker momentum of learning/optimizer.h) modulo their count, byte 1 the parameter count
// (kParamCounts); the rest is the state blob. node_state: the whole input is the blob, loaded into
// node 0 of kNodeStateRun.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/gradient_layout.h"
#include "runtime/training.h"

namespace ballot::fuzzing {

// nullptr: WorkerMomentum (β = 0.9).
inline constexpr std::array<const char*, 7> kOptimizerSpecs = {
    "sgd", "sgd:momentum=0.9,nesterov=1", "heavyball", "sign:wd=0.01", "signum", "ef_sign", nullptr};
inline constexpr std::array<std::size_t, 4> kParamCounts = {0, 1, 65, 203};

// ef_sign keeps one scale per layer: a layout of several layers whenever the count allows it.
inline GradientLayout optimizer_layout(std::size_t params) {
  if (params == 203) return GradientLayout::from_sizes({{"w", 130}, {"empty", 0}, {"b", 73}}).value();
  return GradientLayout::whole(params);
}

// A small vote run with worker momentum: node 0 computes several partitions.
inline runtime::TrainingOptions node_state_run() {
  runtime::TrainingOptions options;
  options.nodes = 5;
  options.byzantine = 1;
  options.code = "deterministic";
  options.model = "mlp:hidden=4";
  options.data = "synthetic:examples=200,features=6,classes=3,separation=2";
  options.lr = "constant:lr=0.01";
  options.rounds = 4;
  options.partition_size = 8;
  options.worker_momentum = 0.9;
  return options;
}

}  // namespace ballot::fuzzing
