#include "runtime/detail/memory_cluster.h"

namespace ballot::runtime::detail {

Result<MemoryCluster> make_memory_cluster(const TrainingSetup& setup, std::shared_ptr<Quarantine> server_quarantine) {
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
  BALLOT_ASSIGN_OR_RETURN(transport_options.limits, frame_limits(setup));
  auto network = transport::MemoryNetwork::create();
  MemoryCluster cluster;
  cluster.evidence.resize(n + 1);
  for (auto& identity : identities) {
    auto endpoint_options = transport_options;
    if (identity.node == 0) {  // the server (runtime/node_session.h: kServerId)
      endpoint_options.observer = server_quarantine;
    } else {
      cluster.evidence[identity.node] = std::make_shared<Quarantine>();
      endpoint_options.observer = cluster.evidence[identity.node];
    }
    BALLOT_ASSIGN_OR_RETURN(auto endpoint, network->attach(std::move(identity), registry, endpoint_options));
    cluster.endpoints.push_back(std::move(endpoint));
  }
  cluster.registry = std::make_shared<const transport::Registry>(std::move(registry));
  return cluster;
}

}  // namespace ballot::runtime::detail
