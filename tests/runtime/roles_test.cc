// The server and node roles over the in-memory transport, with a hand-driven peer playing a
// faulty or hostile node.
#include "runtime/roles.h"

#include <gtest/gtest.h>

#include <thread>

#include "runtime/messages.h"
#include "runtime/replica.h"
#include "transport/memory_transport.h"

namespace ballot::runtime {
namespace {

struct Harness {
  TrainingSetup setup;
  std::shared_ptr<transport::MemoryNetwork> network = transport::MemoryNetwork::create();
  std::vector<std::unique_ptr<transport::MemoryTransport>> endpoints;

  std::shared_ptr<const transport::Registry> registry;
  std::vector<transport::SigningKey> keys;
  std::vector<std::shared_ptr<Quarantine>> evidence;  // each node's own transport observer

  explicit Harness(std::uint64_t rounds, std::shared_ptr<transport::MisbehaviourObserver> server_observer = nullptr,
                   Placement placement = Placement::kReplicated)
      : setup(make(rounds, placement)) {
    transport::Registry registry;
    std::vector<transport::LocalIdentity> identities;
    for (transport::NodeId id = 0; id <= setup.options.nodes; ++id) {
      auto key = transport::SigningKey::generate().value();
      const auto role = id == 0 ? transport::Role::kServer : transport::Role::kNode;
      EXPECT_TRUE(registry.add(id, role, key.verify_key()).ok());
      identities.push_back({id, role, key});
      keys.push_back(key);
    }
    this->registry = std::make_shared<const transport::Registry>(registry);
    transport::TransportOptions options;
    options.job = setup.options.job;
    for (auto& identity : identities) {
      auto endpoint_options = options;
      evidence.push_back(std::make_shared<Quarantine>());
      endpoint_options.observer = identity.node == 0 ? server_observer : evidence.back();
      endpoints.push_back(network->attach(identity, registry, endpoint_options).value());
    }
  }

  static TrainingSetup make(std::uint64_t rounds, Placement placement) {
    TrainingOptions options;
    options.placement = placement;
    options.nodes = 3;
    options.byzantine = 1;
    options.code = "identity";
    options.model = "mlp:hidden=4";
    options.data = "synthetic:examples=200,features=8,classes=2";
    options.rounds = rounds;
    options.eval_every = 0;
    options.partition_size = 4;
    auto data = load_training_data(options).value();
    return make_training_setup(options, std::make_shared<const learning::TrainTestSplit>(std::move(data))).value();
  }
};

// Node 2 never answers: after the deadline the server decides with the quorum n - b = 2.
// The node state is saved when the decision of a multiple of state_every is applied, and only
// with a state directory.
TEST(NodeStateKeeper, SavesOnTheDecisionsOfMultiplesOfStateEvery) {
  NodeOptions options;
  options.state_every = 5;
  const auto decided = [](std::uint64_t round) { return NodeEvent{.kind = NodeEvent::Kind::kDecided, .round = round}; };
  EXPECT_FALSE(NodeStateKeeper(options, 1).saves(decided(10)));  // no state_dir
  options.state_dir = ::testing::TempDir() + "/keeper-saves";
  const NodeStateKeeper keeper(options, 1);
  EXPECT_TRUE(keeper.saves(decided(10)));
  EXPECT_TRUE(keeper.saves(decided(5)));
  EXPECT_FALSE(keeper.saves(decided(11)));
  EXPECT_FALSE(keeper.saves(NodeEvent{.kind = NodeEvent::Kind::kStateInstalled, .round = 10}));
  EXPECT_FALSE(keeper.saves(NodeEvent{.kind = NodeEvent::Kind::kCompute, .round = 10}));
  options.state_every = 0;
  EXPECT_FALSE(NodeStateKeeper(options, 1).saves(decided(10)));
}

TEST(Roles, SilentNodeCostsOnlyTheDeadline) {
  Harness h(3);
  std::vector<std::thread> nodes;
  for (std::size_t i = 0; i < 2; ++i) {
    nodes.emplace_back([&, i] { EXPECT_TRUE(Node(h.setup, i, *h.endpoints[i + 1]).run().ok()); });
  }
  std::vector<RoundReport> reports;
  ServerOptions options;
  options.round_deadline = std::chrono::milliseconds(100);
  options.on_round = [&](const RoundReport& r) { reports.push_back(r); };
  auto summary = Server(h.setup, *h.endpoints[0], options).run();
  for (auto& t : nodes) t.join();
  ASSERT_TRUE(summary.ok()) << summary.error().to_string();
  ASSERT_EQ(reports.size(), 3u);
  for (const auto& r : reports) {
    EXPECT_EQ(r.votes, 2u);
    EXPECT_EQ(r.missing, std::vector<std::size_t>{2});
  }
}

// Node 2 sends an undecodable vote, then a second, different vote in the same round (the
// transport drops it as equivocation) and an unknown control message: each is counted and
// dropped, and the run completes with the honest quorum.
TEST(Roles, MalformedVotesAreCountedAndDropped) {
  Harness h(2);
  std::vector<std::thread> nodes;
  for (std::size_t i = 0; i < 2; ++i) {
    nodes.emplace_back([&, i] { EXPECT_TRUE(Node(h.setup, i, *h.endpoints[i + 1]).run().ok()); });
  }
  std::thread hostile([&] {
    auto& self = *h.endpoints[3];
    (void)self.send(kServerId, transport::MessageType::kVote, 0, {1, 2, 3});
    (void)self.send(kServerId, transport::MessageType::kVote, 0, encode(Vote{0, 0, {}, BitVector(5)}));
    (void)self.send(kServerId, transport::MessageType::kControl, 0, {9, 9});
  });
  std::uint64_t rejected = 0;
  ServerOptions options;
  options.round_deadline = std::chrono::milliseconds(200);
  options.on_round = [&](const RoundReport& r) { rejected += r.rejected_messages; };
  auto summary = Server(h.setup, *h.endpoints[0], options).run();
  hostile.join();
  for (auto& t : nodes) t.join();
  ASSERT_TRUE(summary.ok()) << summary.error().to_string();
  EXPECT_EQ(summary->rounds, 2u);
  EXPECT_EQ(rejected, 2u);  // the undecodable vote and the control message
  EXPECT_EQ(h.endpoints[0]->misbehaviour_counts(3)[static_cast<std::size_t>(transport::Misbehaviour::kEquivocation)],
            1u);
}

// An equivocating node (two different votes in one round) is quarantined through the proof the
// transport hands to the observer, and its later votes are no longer counted.
TEST(Roles, EquivocatorIsQuarantined) {
  auto quarantine = std::make_shared<Quarantine>();
  Harness h(3, quarantine);
  std::vector<std::thread> nodes;
  for (std::size_t i = 0; i < 2; ++i) {
    nodes.emplace_back([&, i] { EXPECT_TRUE(Node(h.setup, i, *h.endpoints[i + 1]).run().ok()); });
  }
  const std::size_t d = Replica::create(h.setup).value().dimension();
  auto& hostile = *h.endpoints[3];
  (void)hostile.send(kServerId, transport::MessageType::kVote, 0, encode(Vote{0, 0, {}, BitVector(d, true)}));
  (void)hostile.send(kServerId, transport::MessageType::kVote, 0, encode(Vote{0, 0, {}, BitVector(d, false)}));
  ASSERT_TRUE(quarantine->is_quarantined(3));
  ASSERT_EQ(quarantine->proofs().size(), 1u);

  ServerOptions options;
  options.round_deadline = std::chrono::milliseconds(150);
  options.quarantine = quarantine;
  std::vector<RoundReport> reports;
  options.on_round = [&](const RoundReport& r) { reports.push_back(r); };
  auto summary = Server(h.setup, *h.endpoints[0], options).run();
  for (auto& t : nodes) t.join();
  ASSERT_TRUE(summary.ok()) << summary.error().to_string();
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_EQ(reports.front().quarantined, std::vector<std::size_t>{2});
  EXPECT_EQ(reports.back().votes, 2u);
}

// Exchange placement: the server checks every input envelope an audited vote lists. A vote that
// counts an input from outside the voter's row, or one whose author's signature does not verify,
// is dropped and counted against the voter; the honest quorum decides.
TEST(Roles, AuditedVotesWithInvalidInputsAreDropped) {
  for (int variant = 0; variant < 3; ++variant) {
    auto quarantine = std::make_shared<Quarantine>();
    Harness h(1, nullptr, Placement::kExchange);
    std::vector<std::thread> nodes;
    for (std::size_t i = 0; i < 2; ++i) {
      nodes.emplace_back([&, i] { EXPECT_TRUE(Node(h.setup, i, *h.endpoints[i + 1]).run().ok()); });
    }
    const auto replica = Replica::create(h.setup).value();
    transport::SignedEnvelope input;
    input.header = {
        h.setup.options.job, 3, transport::Role::kNode, transport::MessageType::kPartitionSigns, 0, 1, 10, {}};
    input.header.payload_digest[0] = 1;
    if (variant == 0) input.header.sender = 2;  // node 1's partition: not in row 2 of G = I
    if (variant == 2) input.header.round = 7;   // another round
    input = transport::sign_envelope(input.header, h.keys[input.header.sender]);
    if (variant == 1) input.signature[0] ^= 0x01;  // not the author's signature
    AuditedVote vote{{0, 0, replica.state_digest(), BitVector(replica.dimension(), true)}, {input}};
    ASSERT_TRUE(h.endpoints[3]->send(kServerId, transport::MessageType::kVote, 0, encode(vote)).ok());

    ServerOptions options;
    options.round_deadline = std::chrono::milliseconds(100);
    options.quarantine = quarantine;
    options.registry = h.registry;
    std::vector<RoundReport> reports;
    options.on_round = [&](const RoundReport& r) { reports.push_back(r); };
    auto summary = Server(h.setup, *h.endpoints[0], options).run();
    for (auto& t : nodes) t.join();
    ASSERT_TRUE(summary.ok()) << summary.error().to_string();
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_EQ(reports[0].votes, 2u) << variant;
    EXPECT_EQ(reports[0].missing, std::vector<std::size_t>{2}) << variant;
    EXPECT_EQ(reports[0].rejected_messages, 1u) << variant;
    EXPECT_EQ(quarantine->events(3), 1u) << variant;
    EXPECT_TRUE(quarantine->proofs().empty());
  }
}

// A source that sends one receiver two different signed signs for one round: the receiver's
// verifier keeps the first and holds the proof, the node forwards it (Evidence) and the server,
// having checked both signatures, quarantines the source.
TEST(Roles, ForwardedEvidenceQuarantinesTheEquivocator) {
  auto quarantine = std::make_shared<Quarantine>();
  Harness h(2, quarantine, Placement::kExchange);
  const std::size_t d = Replica::create(h.setup).value().dimension();
  auto& hostile = *h.endpoints[3];
  ASSERT_TRUE(
      hostile.send(node_id(0), transport::MessageType::kPartitionSigns, 0, encode(Vote{0, 0, {}, BitVector(d, true)}))
          .ok());
  ASSERT_TRUE(
      hostile.send(node_id(0), transport::MessageType::kPartitionSigns, 0, encode(Vote{0, 0, {}, BitVector(d, false)}))
          .ok());
  ASSERT_EQ(h.evidence[1]->proofs().size(), 1u);
  // A forged proof (the second envelope's signature broken) is rejected and counted against
  // whoever forwarded it.
  auto forged = h.evidence[1]->proofs().front();
  forged.second.signature[0] ^= 0x01;
  ASSERT_TRUE(h.endpoints[2]->send(kServerId, transport::MessageType::kControl, 0, encode(Evidence{forged})).ok());

  std::vector<std::thread> nodes;
  for (std::size_t i = 0; i < 2; ++i) {
    NodeOptions node_options;
    node_options.evidence = h.evidence[i + 1];
    nodes.emplace_back(
        [&, i, node_options] { EXPECT_TRUE(Node(h.setup, i, *h.endpoints[i + 1], node_options).run().ok()); });
  }
  ServerOptions options;
  options.round_deadline = std::chrono::milliseconds(2000);
  options.quarantine = quarantine;
  options.registry = h.registry;
  auto summary = Server(h.setup, *h.endpoints[0], options).run();
  for (auto& t : nodes) t.join();
  ASSERT_TRUE(summary.ok()) << summary.error().to_string();
  EXPECT_TRUE(quarantine->is_quarantined(3));
  ASSERT_EQ(quarantine->proofs().size(), 1u);
  EXPECT_EQ(quarantine->events(2), 1u);  // the forged proof
  EXPECT_FALSE(quarantine->is_quarantined(2));
  EXPECT_LT(summary->seconds, 2.0);  // node 3 quarantined: no round waited for its vote
}

// Without a quorum the server gives up with a timeout naming the round, instead of hanging.
TEST(Roles, NoQuorumIsATimeoutError) {
  Harness h(1);
  ServerOptions options;
  options.round_deadline = std::chrono::milliseconds(50);
  options.quorum_timeout = std::chrono::milliseconds(200);
  auto summary = Server(h.setup, *h.endpoints[0], options).run();
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.error().code, ErrorCode::kTimeout);
  EXPECT_NE(summary.error().message.find("round 0"), std::string::npos);
}

}  // namespace
}  // namespace ballot::runtime
