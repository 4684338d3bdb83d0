// A run's participants on one in-memory network (transport/memory_transport.h): fresh Ed25519 keys
// for the server and n nodes, one registry, each endpoint attached with the run's job, and the
// observers that catch misbehaviour. Shared by the simulator and the lockstep engine.
#pragma once

#include <memory>
#include <vector>

#include "core/result.h"
#include "runtime/quarantine.h"
#include "runtime/training.h"
#include "transport/memory_transport.h"

namespace ballot::runtime::detail {

struct MemoryCluster {
  std::shared_ptr<const transport::Registry> registry;
  // [0] the server's, [i + 1] node i's.
  std::vector<std::unique_ptr<transport::MemoryTransport>> endpoints;
  // [i + 1]: the observer of node i's endpoint, holding the equivocation proofs it forwards to the
  // server; [0] is null (the server's endpoint reports to the server's quarantine).
  std::vector<std::shared_ptr<Quarantine>> evidence;
};

Result<MemoryCluster> make_memory_cluster(const TrainingSetup& setup, std::shared_ptr<Quarantine> server_quarantine);

}  // namespace ballot::runtime::detail
