// The in-process simulator: the server and n nodes of the round protocol (runtime/roles.h), each
// on its own thread, over the in-memory transport (transport/memory_transport.h) with real
// Ed25519-signed envelopes. Same code, same seed → the same model as the process cluster when no
// node fails. Keys are generated per run; nothing touches the disk unless a checkpoint path is set.
#pragma once

#include <vector>

#include "core/result.h"
#include "runtime/roles.h"
#include "runtime/training.h"

namespace ballot::runtime {

struct SimulationOptions {
  ServerOptions server;
  NodeOptions node;
};

struct SimulationResult {
  TrainingSummary server;
  std::vector<Result<NodeSummary>> nodes;  // per node index
};

Result<SimulationResult> simulate(const TrainingSetup& setup, SimulationOptions options = {});

}  // namespace ballot::runtime
