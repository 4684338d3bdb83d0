#include "transport/memory_transport.h"

#include <gtest/gtest.h>

#include <thread>

#include "test_harness.h"

namespace ballot::transport {
namespace {

using namespace testing;

LocalIdentity identity(TestPki& pki, NodeId id) {
  const Credentials c = pki.credentials(id);
  return LocalIdentity{c.node, c.role, c.key};
}

TEST(MemoryTransport, AttachOncePerId) {
  TestPki pki(1);
  auto network = MemoryNetwork::create();
  auto a = network->attach(identity(pki, 1), pki.registry());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(network->attach(identity(pki, 1), pki.registry()).error().code, ErrorCode::kInvalidArgument);
  a->reset();  // detached: the id is free again
  EXPECT_TRUE(network->attach(identity(pki, 1), pki.registry()).ok());
}

TEST(MemoryTransport, UnattachedPeerIsUnavailable) {
  TestPki pki(1);
  auto network = MemoryNetwork::create();
  auto server = network->attach(identity(pki, 0), pki.registry()).value();
  EXPECT_EQ(server->send(1, MessageType::kDecision, 0, {1}).error().code, ErrorCode::kUnavailable);
}

TEST(MemoryTransport, BackPressureOnAFullInbox) {
  TestPki pki(1);
  auto network = MemoryNetwork::create();
  TransportOptions options;
  options.max_inbox_bytes = 1000;
  options.send_timeout = 100ms;
  auto server = network->attach(identity(pki, 0), pki.registry(), options).value();
  auto node = network->attach(identity(pki, 1), pki.registry(), options).value();
  ASSERT_TRUE(node->send(0, MessageType::kControl, 0, std::vector<std::uint8_t>(1500)).ok());
  EXPECT_EQ(node->send(0, MessageType::kControl, 0, std::vector<std::uint8_t>(10)).error().code, ErrorCode::kTimeout);
  ASSERT_TRUE(server->receive(100ms).ok());
  EXPECT_TRUE(node->send(0, MessageType::kControl, 0, std::vector<std::uint8_t>(10)).ok());
}

TEST(MemoryTransport, ReceiveEndsWhenDetached) {
  TestPki pki(1);
  auto network = MemoryNetwork::create();
  auto server = network->attach(identity(pki, 0), pki.registry()).value();
  EXPECT_EQ(server->receive(20ms).error().code, ErrorCode::kTimeout);
}

}  // namespace
}  // namespace ballot::transport
