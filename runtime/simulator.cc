#include "runtime/simulator.h"

#include <thread>

#include "runtime/adversary.h"
#include "runtime/detail/memory_cluster.h"
#include "runtime/messages.h"

namespace ballot::runtime {

Result<SimulationResult> simulate(const TrainingSetup& setup, SimulationOptions options) {
  const std::size_t n = setup.options.nodes;
  if (!options.server.quarantine) options.server.quarantine = std::make_shared<Quarantine>();
  BALLOT_ASSIGN_OR_RETURN(auto cluster, detail::make_memory_cluster(setup, options.server.quarantine));
  if (!options.server.registry) options.server.registry = cluster.registry;
  options.node.relayed_decisions = options.server.relay_decisions;
  auto& endpoints = cluster.endpoints;

  // The attackers of the simulation share one view of the honest messages (runtime/adversary.h).
  if (!options.node.coalition && needs_honest_view(setup)) options.node.coalition = std::make_shared<Coalition>(setup);
  SimulationResult result;
  result.nodes.assign(n, make_error(ErrorCode::kInternal, "node did not run"));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      auto node_options = options.node;
      node_options.evidence = cluster.evidence[i + 1];
      Node node(setup, i, *endpoints[i + 1], node_options);
      result.nodes[i] = node.run();
    });
  }
  Server server(setup, *endpoints[0], options.server);
  auto summary = server.run();
  if (!summary.ok()) {
    // The server stopped early: release the nodes instead of letting them wait for it.
    std::vector<transport::NodeId> nodes;
    for (std::size_t i = 0; i < n; ++i) nodes.push_back(node_id(i));
    endpoints[0]->set_round(setup.options.rounds);
    (void)endpoints[0]->broadcast(nodes, transport::MessageType::kControl, setup.options.rounds, encode(Finish{0}));
  }
  for (auto& thread : threads) thread.join();
  if (!summary.ok()) return std::move(summary).error();
  result.server = *summary;
  return result;
}

}  // namespace ballot::runtime
