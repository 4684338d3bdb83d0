#include "runtime/simulator.h"

#include <thread>

#include "runtime/adversary.h"
#include "runtime/messages.h"
#include "transport/memory_transport.h"

namespace ballot::runtime {

Result<SimulationResult> simulate(const TrainingSetup& setup, SimulationOptions options) {
  const std::size_t n = setup.options.nodes;
  std::vector<transport::LocalIdentity> identities;
  transport::Registry registry;
  for (std::size_t id = 0; id <= n; ++id) {
    BALLOT_ASSIGN_OR_RETURN(auto key, transport::SigningKey::generate());
    const auto role = id == 0 ? transport::Role::kServer : transport::Role::kNode;
    BALLOT_TRY(registry.add(static_cast<transport::NodeId>(id), role, key.verify_key()));
    identities.push_back({static_cast<transport::NodeId>(id), role, std::move(key)});
  }
  transport::TransportOptions transport_options;
  transport_options.job = setup.options.job;
  auto network = transport::MemoryNetwork::create();
  std::vector<std::unique_ptr<transport::MemoryTransport>> endpoints;
  if (!options.server.quarantine) options.server.quarantine = std::make_shared<Quarantine>();
  if (!options.server.registry) options.server.registry = std::make_shared<const transport::Registry>(registry);
  // Each node's own observer collects the equivocation proofs it forwards to the server.
  std::vector<std::shared_ptr<Quarantine>> evidence(n + 1);
  for (auto& identity : identities) {
    auto endpoint_options = transport_options;
    if (identity.node == 0) endpoint_options.observer = options.server.quarantine;
    if (identity.node != 0) {
      evidence[identity.node] = std::make_shared<Quarantine>();
      endpoint_options.observer = evidence[identity.node];
    }
    BALLOT_ASSIGN_OR_RETURN(auto endpoint, network->attach(identity, registry, endpoint_options));
    endpoints.push_back(std::move(endpoint));
  }

  // The attackers of the simulation share one view of the honest messages (runtime/adversary.h).
  if (!options.node.coalition && needs_honest_view(setup)) options.node.coalition = std::make_shared<Coalition>(setup);
  SimulationResult result;
  result.nodes.assign(n, make_error(ErrorCode::kInternal, "node did not run"));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      auto node_options = options.node;
      node_options.evidence = evidence[i + 1];
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
