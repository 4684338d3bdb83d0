#include "transport/tls_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>

#include "test_harness.h"

namespace ballot::transport {
namespace {

using namespace testing;

std::vector<std::uint8_t> bytes_of(std::size_t n, std::uint8_t value) { return std::vector<std::uint8_t>(n, value); }

class TlsTransportTest : public ::testing::Test {
 protected:
  // Server 0 and honest node 1 talk; the attacker is set up per test.
  void SetUp() override { cluster_ = std::make_unique<TlsCluster>(pki_); }

  void expect_honest_round_trip() {
    ASSERT_TRUE(cluster_->honest().send(0, MessageType::kControl, 0, bytes_of(100, 1)).ok());
    auto got = cluster_->server().receive(3000ms);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    EXPECT_EQ(got->from, 1u);
    ASSERT_TRUE(cluster_->server().send(1, MessageType::kControl, 0, bytes_of(100, 2)).ok());
    auto back = cluster_->honest().receive(3000ms);
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(back->from, 0u);
  }

  // Node 3 as a raw TLS client past its Hello: the test then writes whatever bytes it likes. Call
  // it under ASSERT_NO_FATAL_FAILURE.
  void connect_raw_node3(std::unique_ptr<RawTlsClient>& client) {
    client = std::make_unique<RawTlsClient>(cluster_->tls_server().port(), &node3_, node3_.ca_certificate_der);
    ASSERT_FALSE(client->connect());
    ASSERT_FALSE(client->exchange_hello(node3_signer_, 3));
    ASSERT_TRUE(cluster_->tls_server().wait_connected(3, 2000ms).ok());
  }

  TestPki pki_{4};
  std::unique_ptr<TlsCluster> cluster_;
  const Credentials node3_ = pki_.credentials(3);
  Signer node3_signer_{node3_.key, kJob, 3, Role::kNode};
};

// A cluster file may name hosts (one written from a Slurm node list does): the listener resolves
// a name as a dialler does; a name that resolves to nothing is a named error, not a crash.
TEST_F(TlsTransportTest, ListensOnAHostName) {
  // Server 0 listening on `listen_host`, node 1 dialling it at `dial_host`: connected?
  const auto connects = [&](const std::string& listen_host, const std::string& dial_host) {
    auto server_options = tls_options(nullptr);
    server_options.listen_host = listen_host;
    auto server = TlsTransport::create(pki_.credentials(0), pki_.registry(), server_options);
    if (!server.ok()) return ::testing::AssertionFailure() << server.error().to_string();
    auto node_options = tls_options(nullptr);
    node_options.listen = false;
    node_options.dial[0] = PeerAddress{dial_host, (*server)->port()};
    auto node = TlsTransport::create(pki_.credentials(1), pki_.registry(), node_options);
    if (!node.ok()) return ::testing::AssertionFailure() << node.error().to_string();
    if (!(*node)->wait_connected(0, 3000ms).ok())
      return ::testing::AssertionFailure() << "not connected: listening on '" << listen_host << "'";
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(connects("localhost", "localhost"));
  // The machine's own name often resolves to a loopback address on the machine (127.0.1.1 on
  // Debian) while other machines reach it by another: a named listener takes every address, so a
  // node dialling 127.0.0.1 reaches it whatever the name resolves to here.
  char name[256] = {};
  addrinfo* found = nullptr;
  if (::gethostname(name, sizeof(name) - 1) == 0 && ::getaddrinfo(name, nullptr, nullptr, &found) == 0) {
    ::freeaddrinfo(found);
    EXPECT_TRUE(connects(name, "127.0.0.1"));
  }

  auto server_options = tls_options(nullptr);
  server_options.listen_host = "no-such-host.invalid";  // RFC 2606: never resolves
  auto unknown = TlsTransport::create(pki_.credentials(0), pki_.registry(), server_options);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("cannot resolve the listen host 'no-such-host.invalid'"), std::string::npos)
      << unknown.error().message;
}

TEST_F(TlsTransportTest, ClientWithoutCertificateIsRefused) {
  RawTlsClient client(cluster_->tls_server().port(), nullptr, pki_.credentials(1).ca_certificate_der);
  (void)client.connect();  // TLS 1.3: the client may finish before the server rejects it
  std::vector<std::uint8_t> bytes;
  EXPECT_TRUE(client.read(kFrameHeaderSize, &bytes)) << "the server must not talk to a client without a certificate";
  auto report = cluster_->observer().wait_for(Misbehaviour::kHandshakeFailed);
  ASSERT_TRUE(report.has_value());
  EXPECT_FALSE(report->peer.has_value());
  EXPECT_EQ(report->error.code, ErrorCode::kAuthentication);
  expect_honest_round_trip();
}

TEST_F(TlsTransportTest, CertificateOfAnotherCaIsRefused) {
  TestPki other(3, "other");
  const Credentials foreign = other.credentials(3);  // node 3, but of another cluster's CA
  RawTlsClient client(cluster_->tls_server().port(), &foreign, pki_.credentials(1).ca_certificate_der);
  (void)client.connect();
  std::vector<std::uint8_t> bytes;
  EXPECT_TRUE(client.read(kFrameHeaderSize, &bytes));
  auto report = cluster_->observer().wait_for(Misbehaviour::kHandshakeFailed);
  ASSERT_TRUE(report.has_value());
  EXPECT_NE(report->error.message.find("certificate"), std::string::npos) << report->error.to_string();
  EXPECT_FALSE(cluster_->tls_server().connected(3));
  expect_honest_round_trip();
}

TEST_F(TlsTransportTest, NodeThreeClaimingNodeFourIsRefused) {
  const Credentials node3 = pki_.credentials(3);
  RawTlsClient client(cluster_->tls_server().port(), &node3, node3.ca_certificate_der);
  ASSERT_FALSE(client.connect());
  Signer claims_four(node3.key, kJob, 4, Role::kNode);  // node 3's key, sender field 4
  ASSERT_FALSE(client.exchange_hello(claims_four, 4));
  auto report = cluster_->observer().wait_for(Misbehaviour::kIdentityMismatch);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->peer, 3u);  // blamed on the certificate's owner
  EXPECT_NE(report->error.message.find("claims sender 4"), std::string::npos) << report->error.to_string();
  std::vector<std::uint8_t> bytes;
  EXPECT_TRUE(client.read(1, &bytes));  // the server closed the connection
  EXPECT_FALSE(cluster_->tls_server().connected(4));
  EXPECT_FALSE(cluster_->tls_server().connected(3));
  expect_honest_round_trip();
}

// A certificate the same CA issued again for an id (leaked, mis-issued or superseded), with another
// key than the pinned one, is refused, and its id is not blamed: whoever holds it must not get that
// node counted. The node with the pinned key still gets in.
TEST_F(TlsTransportTest, SecondCertificateForAnIdIsRefusedAndBlamesNobody) {
  const std::filesystem::path forged = pki_.tmp.path() / "forged";
  std::filesystem::copy(pki_.dir, forged, std::filesystem::copy_options::recursive);
  for (const char* file : {"node-3.crt", "node-3.key", "node-4.crt", "node-4.key"})
    std::filesystem::remove(forged / file);
  ASSERT_TRUE(issue_node(forged, 3, Role::kNode).ok());
  ASSERT_TRUE(issue_node(forged, 4, Role::kServer).ok());  // id 4 is a node in the registry
  struct Case {
    NodeId id;
    Misbehaviour kind;
    const char* message;
  };
  for (const Case& c : {Case{3, Misbehaviour::kIdentityMismatch, "differs from the pinned key"},
                        Case{4, Misbehaviour::kUnknownSender, "is not in the registry"}}) {
    SCOPED_TRACE(c.id);
    const Credentials second = load_credentials(forged, c.id).value();
    RawTlsClient client(cluster_->tls_server().port(), &second, second.ca_certificate_der);
    (void)client.connect();  // TLS 1.3: the client may finish before the server rejects it
    std::vector<std::uint8_t> bytes;
    EXPECT_TRUE(client.read(kFrameHeaderSize, &bytes)) << "the server must close the connection";
    auto report = cluster_->observer().wait_for(c.kind);
    ASSERT_TRUE(report.has_value());
    EXPECT_FALSE(report->peer.has_value()) << "blamed on node " << *report->peer;
    EXPECT_FALSE(report->error.peer.has_value());
    EXPECT_NE(report->error.message.find(c.message), std::string::npos) << report->error.to_string();
    EXPECT_FALSE(cluster_->tls_server().connected(c.id));
  }
  // No report of the run blames node 3 or node 4.
  for (const auto& report : cluster_->observer().reports()) {
    EXPECT_FALSE(report.peer == 3u || report.peer == 4u) << report.error.to_string();
  }
  // Node 3 with its pinned key connects, and the honest pair still talks.
  std::unique_ptr<RawTlsClient> real;
  ASSERT_NO_FATAL_FAILURE(connect_raw_node3(real));
  expect_honest_round_trip();
}

TEST_F(TlsTransportTest, PeerStallingMidFrameHitsTheDeadline) {
  std::unique_ptr<RawTlsClient> client;
  ASSERT_NO_FATAL_FAILURE(connect_raw_node3(client));
  auto frame =
      node3_signer_.seal(MessageType::kVote, 0, std::make_shared<std::vector<std::uint8_t>>(10000, 3)).to_bytes();
  frame.resize(kFrameHeaderSize + 100);  // header and part of the envelope, then silence
  const auto stalled_at = std::chrono::steady_clock::now();
  ASSERT_FALSE(client->write(frame));
  // While node 3 stalls, node 1's session keeps working.
  expect_honest_round_trip();
  auto report = cluster_->observer().wait_for(Misbehaviour::kTimeout, 4000ms);
  ASSERT_TRUE(report.has_value());
  const auto waited = std::chrono::steady_clock::now() - stalled_at;
  EXPECT_EQ(report->peer, 3u);
  EXPECT_EQ(report->error.code, ErrorCode::kTimeout);
  EXPECT_GE(waited, 900ms);   // frame_timeout is 1 s in these tests
  EXPECT_LT(waited, 3000ms);  // and it fires within a small multiple of it (loaded CI machines)
  for (int i = 0; i < 100 && cluster_->tls_server().connected(3); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(cluster_->tls_server().connected(3));  // that session is closed
  expect_honest_round_trip();
}

TEST_F(TlsTransportTest, ANodesStateTransferEndsItsSessionOnTheHeader) {
  // A node announcing 1 GiB of state (a type only the server sends) is cut off at the header: the
  // server neither waits for nor buffers the payload.
  std::unique_ptr<RawTlsClient> client;
  ASSERT_NO_FATAL_FAILURE(connect_raw_node3(client));
  auto frame = node3_signer_.seal(MessageType::kStateTransfer, 0, std::make_shared<std::vector<std::uint8_t>>(1000, 3));
  auto bytes = frame.to_bytes();
  const std::uint64_t announced = 1ull << 30;
  std::memcpy(bytes.data() + 16, &announced, sizeof(announced));  // payload length (little-endian header)
  bytes.resize(kFrameHeaderSize);
  ASSERT_FALSE(client->write(bytes));
  auto report = cluster_->observer().wait_for(Misbehaviour::kNotPermitted, 2000ms);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->peer, 3u);
  EXPECT_NE(report->error.message.find("may not send state-transfer"), std::string::npos) << report->error.message;
  for (int i = 0; i < 100 && cluster_->tls_server().connected(3); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(cluster_->tls_server().connected(3));
  expect_honest_round_trip();
}

TEST_F(TlsTransportTest, DiallerChecksWhoAnswered) {
  // Node 1 dials "the server" at an address where node 3 listens.
  auto impostor = TlsTransport::create(pki_.credentials(3), pki_.registry(), tls_options(nullptr)).value();
  auto observer = std::make_shared<RecordingObserver>();
  auto options = tls_options(observer);
  options.listen = false;
  options.dial[0] = PeerAddress{"127.0.0.1", impostor->port()};
  TestPki& pki = pki_;
  auto node = TlsTransport::create(pki.credentials(4), pki.registry(), options).value();
  auto report = observer->wait_for(Misbehaviour::kIdentityMismatch);
  ASSERT_TRUE(report.has_value());
  // Node 3 did not claim to be the server (a stale address, or a connection forwarded to it):
  // nobody is blamed.
  EXPECT_FALSE(report->peer.has_value()) << "blamed on node " << *report->peer;
  EXPECT_NE(report->error.message.find("dialled node 0"), std::string::npos) << report->error.to_string();
  EXPECT_FALSE(node->connected(0));
  EXPECT_NE(node->dial_error(0).find("dialled node 0"), std::string::npos) << node->dial_error(0);
}

// Why the server cannot be reached is kept for the operator's error message, and cleared once a
// session delivers.
TEST_F(TlsTransportTest, DialErrorSaysWhyAndClearsOnceConnected) {
  std::uint16_t port = 0;
  {
    auto probe = TlsTransport::create(pki_.credentials(0), pki_.registry(), tls_options(nullptr)).value();
    port = probe->port();
  }  // nothing listens there now
  auto options = tls_options(nullptr);
  options.listen = false;
  options.dial[0] = PeerAddress{"127.0.0.1", port};
  auto node = TlsTransport::create(pki_.credentials(3), pki_.registry(), options).value();
  EXPECT_EQ(node->dial_error(5), "");  // not dialled
  std::string why;
  for (int i = 0; i < 300 && why.empty(); ++i) {
    std::this_thread::sleep_for(10ms);
    why = node->dial_error(0);
  }
  EXPECT_NE(why.find("cannot connect to 127.0.0.1:" + std::to_string(port)), std::string::npos) << why;
  auto restart = tls_options(nullptr);
  restart.listen_port = port;
  auto server = TlsTransport::create(pki_.credentials(0), pki_.registry(), restart).value();
  ASSERT_TRUE(node->wait_connected(0, 5000ms).ok());
  ASSERT_TRUE(node->send(0, MessageType::kControl, 0, bytes_of(4, 1)).ok());
  ASSERT_TRUE(server->send(3, MessageType::kControl, 0, bytes_of(4, 2)).ok());
  ASSERT_TRUE(node->receive(3000ms).ok());
  // Cleared on the I/O thread right after the frame is handed over.
  for (int i = 0; i < 300 && !node->dial_error(0).empty(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(node->dial_error(0), "");
}

// A server that does not know this node refuses it after the TLS handshake: the node says so.
TEST_F(TlsTransportTest, DialErrorSaysTheServerRefusedUs) {
  auto server = TlsTransport::create(pki_.credentials(0), pki_.registry(), tls_options(nullptr)).value();
  pki_.issue(5, Role::kNode);  // after the server read its registry
  auto options = tls_options(nullptr);
  options.listen = false;
  options.dial[0] = PeerAddress{"127.0.0.1", server->port()};
  auto node = TlsTransport::create(pki_.credentials(5), pki_.registry(), options).value();
  std::string why;
  for (int i = 0; i < 300 && why.find("before authentication") == std::string::npos; ++i) {
    std::this_thread::sleep_for(10ms);
    why = node->dial_error(0);
  }
  EXPECT_NE(why.find("ended the connection before authentication"), std::string::npos) << why;
  EXPECT_FALSE(node->connected(0));
}

TEST_F(TlsTransportTest, RedialsAfterServerRestartAndKeepsQueuedFrames) {
  auto server = TlsTransport::create(pki_.credentials(0), pki_.registry(), tls_options(nullptr)).value();
  const std::uint16_t port = server->port();
  auto options = tls_options(nullptr);
  options.listen = false;
  options.dial[0] = PeerAddress{"127.0.0.1", port};
  auto node = TlsTransport::create(pki_.credentials(3), pki_.registry(), options).value();
  ASSERT_TRUE(node->wait_connected(0, 3000ms).ok());
  server.reset();  // the server goes away; the node keeps redialling with back-off
  for (int i = 0; i < 200 && node->connected(0); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_FALSE(node->connected(0));
  // Sent while no session exists: queued on the link, written after the redial.
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(node->send(0, MessageType::kControl, 0, bytes_of(10, static_cast<std::uint8_t>(i))).ok());
  auto restart = tls_options(nullptr);
  restart.listen_port = port;
  server = TlsTransport::create(pki_.credentials(0), pki_.registry(), restart).value();
  ASSERT_TRUE(node->wait_connected(0, 3000ms).ok());
  for (int i = 0; i < 5; ++i) {
    auto got = server->receive(3000ms);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    EXPECT_EQ(got->from, 3u);
    EXPECT_EQ(got->payload, bytes_of(10, static_cast<std::uint8_t>(i)));
  }
}

// A peer with no session (crashed, unplugged, refused) must not cost every send the send timeout:
// the oldest frames queued for it give way, and when it connects it gets the newest ones.
TEST_F(TlsTransportTest, SendsToAPeerWithoutASessionEvictTheOldestRoundFramesOnly) {
  auto options = tls_options(nullptr);
  options.transport.max_send_queue_frames = 3;
  options.transport.send_timeout = 2000ms;
  auto server = TlsTransport::create(pki_.credentials(0), pki_.registry(), options).value();
  ASSERT_FALSE(server->connected(3));
  const auto started = std::chrono::steady_clock::now();
  // A state transfer and a control frame (a Finish) stay; round-scoped frames give way.
  ASSERT_TRUE(server->send(3, MessageType::kStateTransfer, 0, bytes_of(10, 100)).ok());
  ASSERT_TRUE(server->send(3, MessageType::kControl, 0, bytes_of(10, 101)).ok());
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(server->send(3, MessageType::kRoundStart, 0, bytes_of(10, static_cast<std::uint8_t>(i))).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1000ms);  // waiting would take 3 x 2 s
  auto node_options = tls_options(nullptr);
  node_options.listen = false;
  node_options.dial[0] = PeerAddress{"127.0.0.1", server->port()};
  auto node = TlsTransport::create(pki_.credentials(3), pki_.registry(), node_options).value();
  for (std::uint8_t value : {100, 101, 4}) {
    auto got = node->receive(3000ms);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    EXPECT_EQ(got->payload, bytes_of(10, value));
  }
  EXPECT_EQ(node->receive(200ms).error().code, ErrorCode::kTimeout);
  // A queue of frames that never give way: the send waits for room, then reports the timeout.
  for (std::uint8_t value : {1, 2, 3}) ASSERT_TRUE(server->send(2, MessageType::kControl, 0, bytes_of(10, value)).ok());
  EXPECT_EQ(server->send(2, MessageType::kControl, 0, bytes_of(10, 4)).error().code, ErrorCode::kTimeout);
}

TEST_F(TlsTransportTest, BackPressureWhenThePeerDoesNotRead) {
  auto options = tls_options(nullptr);
  options.transport.max_inbox_bytes = 1 << 20;
  auto server = TlsTransport::create(pki_.credentials(0), pki_.registry(), options).value();
  auto node_options = tls_options(nullptr);
  node_options.listen = false;
  node_options.dial[0] = PeerAddress{"127.0.0.1", server->port()};
  node_options.transport.max_send_queue_frames = 2;
  node_options.transport.send_timeout = 200ms;
  auto node = TlsTransport::create(pki_.credentials(1), pki_.registry(), node_options).value();
  ASSERT_TRUE(node->wait_connected(0, 3000ms).ok());
  // The server never calls receive(): its inbox fills, it stops reading, TCP fills, the send
  // queue fills, and send() reports the back-pressure instead of buffering without bound.
  Status status;
  int sent = 0;
  for (; sent < 200 && status.ok(); ++sent) status = node->send(0, MessageType::kVotePiece, 0, bytes_of(1 << 20, 7));
  ASSERT_FALSE(status.ok()) << "sent " << sent << " MiB without back-pressure";
  EXPECT_EQ(status.error().code, ErrorCode::kTimeout);
  // Draining the inbox resumes the flow.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(server->receive(3000ms).ok());
  bool resumed = false;
  for (int attempt = 0; attempt < 20 && !resumed; ++attempt) {
    resumed = node->send(0, MessageType::kVotePiece, 0, bytes_of(10, 8)).ok();
    if (!resumed) (void)server->receive(500ms);
  }
  EXPECT_TRUE(resumed);
}

// Node 1, which does not read until the test reads, and the server dialling it with a send queue
// of 4 frames. Timeouts inside frames are a minute: the pause is the test's, not a fault
// (sanitizers make it long).
std::pair<std::unique_ptr<TlsTransport>, std::unique_ptr<TlsTransport>> non_reading_peer(
    TestPki& pki, std::uint64_t round, std::chrono::milliseconds send_timeout) {
  auto options = tls_options(nullptr);
  options.transport.max_inbox_bytes = 1 << 20;
  options.frame_timeout = 60000ms;
  auto node = TlsTransport::create(pki.credentials(1), pki.registry(), options).value();
  node->set_round(round);
  auto server_options = tls_options(nullptr);
  server_options.write_timeout = 60000ms;
  server_options.listen = false;
  server_options.dial[1] = PeerAddress{"127.0.0.1", node->port()};
  server_options.transport.max_send_queue_frames = 4;
  server_options.transport.send_timeout = send_timeout;
  auto server = TlsTransport::create(pki.credentials(0), pki.registry(), server_options).value();
  EXPECT_TRUE(server->wait_connected(1, 3000ms).ok());
  return {std::move(node), std::move(server)};
}

// Reads until a frame of `type` arrives (true), or nothing more does; counts the frames read.
bool read_until(TlsTransport& node, MessageType type, int& got) {
  for (const auto give_up = std::chrono::steady_clock::now() + 120s; std::chrono::steady_clock::now() < give_up;) {
    auto message = node.receive(10000ms);
    if (!message.ok()) {
      std::string counts;
      for (const auto count : node.misbehaviour_counts(0)) counts += std::to_string(count) + " ";
      ADD_FAILURE() << "after " << got << " frames: " << message.error().to_string()
                    << "; misbehaviour counts seen by the node: " << counts;
      return false;
    }
    ++got;
    if (message->type == type) return true;
  }
  return false;
}

// A connected peer that does not read (slow, or hostile: it could otherwise make every send to it
// wait send_timeout, and a server's loop with them) loses what it has not read of older rounds,
// and gets a one-per-round frame it already has queued only once: those sends do not wait.
TEST_F(TlsTransportTest, APeerThatDoesNotReadLosesStaleFramesNotTheSendersTime) {
  // send_timeout 20 s: a wait would show as a slow test, not pass.
  auto [node, server] = non_reading_peer(pki_, 200, 20000ms);
  const auto started = std::chrono::steady_clock::now();
  // 200 MiB of state, a round apart: far past the inbox, TCP's buffers and the queue.
  for (std::uint64_t round = 0; round < 200; ++round) {
    auto state = bytes_of(1 << 20, 2);
    state[0] = static_cast<std::uint8_t>(round);
    ASSERT_TRUE(server->send(1, MessageType::kStateTransfer, round, std::move(state)).ok()) << round;
  }
  // The same round start again and again (the answer to a flood of Joins): queued once.
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(server->send(1, MessageType::kRoundStart, 200, bytes_of(16, 3)).ok()) << i;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 15s);  // no send waited send_timeout
  // Reading again: the round start arrives after fewer frames than were sent.
  int got = 0;
  EXPECT_TRUE(read_until(*node, MessageType::kRoundStart, got));
  EXPECT_LT(got, 700);
}

// What such a peer still needs stays queued: the decision of the round before the new frame's,
// and anything at all when the new frame is a control frame (Finish after the last decision).
TEST_F(TlsTransportTest, APeerThatDoesNotReadKeepsTheLastDecision) {
  auto [node, server] = non_reading_peer(pki_, 40, 300ms);
  for (std::uint64_t round = 0; round < 40; ++round)  // far past the inbox and TCP's buffers
    ASSERT_TRUE(server->send(1, MessageType::kStateTransfer, round, bytes_of(1 << 20, 2)).ok()) << round;
  ASSERT_TRUE(server->send(1, MessageType::kDecision, 40, bytes_of(32, 4)).ok());
  ASSERT_TRUE(server->send(1, MessageType::kRoundStart, 41, bytes_of(16, 5)).ok());
  // Finish: with the queue full of the last two rounds' frames it waits and fails, dropping none.
  for (int i = 0; i < 3; ++i) (void)server->send(1, MessageType::kControl, 41, bytes_of(8, 6));
  int got = 0;
  EXPECT_TRUE(read_until(*node, MessageType::kDecision, got));
}

// The process's CPU time (all threads), in seconds.
double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

// A TCP connection to `port` from `source` (any loopback address: Linux routes all of 127/8 to lo).
int connect_from(const char* source, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &local.sin_addr);
  sockaddr_in server{};
  server.sin_family = AF_INET;
  server.sin_port = htons(port);
  server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0 ||
      ::connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof server) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server has closed `fd` (nothing is ever sent to these connections before it).
bool closed_by_server(int fd) {
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// Admission evicts idle sockets before a handshake that has started, from whichever address they
// come: 64 idle sockets from 64 addresses (the pending limit, one each) used to push out a
// participant's started handshake, because the victim was chosen within the address holding the
// most, and the participant's address was the first of the ties.
TEST_F(TlsTransportTest, IdleSocketsFromManyAddressesLeaveAStartedHandshake) {
  const std::uint16_t port = cluster_->tls_server().port();
  const int started = connect_from("127.0.0.1", port);
  ASSERT_GE(started, 0);
  const char client_hello_first_byte = 0x16;
  ASSERT_EQ(::send(started, &client_hello_first_byte, 1, MSG_NOSIGNAL), 1);
  std::this_thread::sleep_for(100ms);
  std::vector<int> idle;
  for (int i = 1; i <= 64; ++i) {
    const std::string source = "127.0.1." + std::to_string(i);
    const int fd = connect_from(source.c_str(), port);
    ASSERT_GE(fd, 0) << source << ": " << std::strerror(errno);
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(400ms);  // well inside the handshake's 3 s and the idle ones' 1 s
  EXPECT_FALSE(closed_by_server(started)) << "the started handshake was evicted";
  std::size_t evicted = 0;
  for (const int fd : idle) evicted += closed_by_server(fd) ? 1 : 0;
  EXPECT_GE(evicted, 1u) << "65 connections for 64 pending places: one idle socket makes room";
  for (const int fd : idle) ::close(fd);
  ::close(started);
  expect_honest_round_trip();
}

// Out of file descriptors, the server's accept fails, and fails again at once for as long as
// connections wait in its listen queue. The server waits before it tries again (instead of holding
// an I/O thread in a loop of failing accepts), keeps serving its sessions, and accepts again once
// descriptors are free.
TEST_F(TlsTransportTest, AcceptWaitsWhileOutOfDescriptorsAndRecovers) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizer runtimes need descriptors of their own: UBSan's vptr check tests whether memory
  // is readable through a pipe, and with none left it reports every virtual call it checks as one
  // on an invalid object. So this test runs in the normal build only.
  GTEST_SKIP() << "the sanitizer runtimes cannot run without free file descriptors";
#endif
  expect_honest_round_trip();
  const std::uint16_t port = cluster_->tls_server().port();
  // Another process queues connections that this one cannot accept (its sockets do not use this
  // process's descriptors); it only calls async-signal-safe functions, then waits to be killed
  // (and dies with this process if this one dies first).
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(1);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 8; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (fd >= 0) (void)::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
    }
    for (;;) ::pause();
  }
  const int base = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(base, 0);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  // Every descriptor this process may open is in use: the limit is lowered to the count of those
  // open now (the listing's own one included), and the ones left are taken.
  std::size_t open = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++open;
  }
  rlimit low = saved;
  low.rlim_cur = open;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> taken;
  for (int fd = ::dup(base); fd >= 0; fd = ::dup(base)) taken.push_back(fd);
  std::this_thread::sleep_for(300ms);  // the child's connections are queued; accepts fail
  const double before = cpu_seconds();
  std::this_thread::sleep_for(1000ms);
  const double busy = cpu_seconds() - before;
  // The established session still works meanwhile (it needs no new descriptor).
  expect_honest_round_trip();
  for (const int fd : taken) ::close(fd);
  ::close(base);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  // A failing accept tried again at once kept an I/O thread busy the whole second (about 1 s of
  // CPU); paced, it costs a few milliseconds.
  EXPECT_LT(busy, 0.3) << "CPU seconds in one second of failing accepts";
  // Descriptors are free again: a participant connects and completes its handshake.
  const Credentials participant = pki_.credentials(2);
  RawTlsClient client(port, &participant, participant.ca_certificate_der);
  EXPECT_FALSE(client.connect(3000ms));
}

TEST(TlsTransportPlain, PlaintextModeCarriesFrames) {
  TestPki pki(1);
  auto options = tls_options(nullptr);
  options.security = ChannelSecurity::kInsecurePlaintext;
  auto server = TlsTransport::create(pki.credentials(0), pki.registry(), options).value();
  options.listen = false;
  options.dial[0] = PeerAddress{"127.0.0.1", server->port()};
  auto node = TlsTransport::create(pki.credentials(1), pki.registry(), options).value();
  ASSERT_TRUE(node->wait_connected(0, 3000ms).ok());
  ASSERT_TRUE(node->send(0, MessageType::kVote, 0, bytes_of(1000, 9)).ok());
  auto got = server->receive(3000ms);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->from, 1u);
  EXPECT_EQ(got->payload, bytes_of(1000, 9));
}

TEST(TlsTransportCreate, Errors) {
  TestPki pki(1);
  auto options = tls_options(nullptr);
  options.dial[7] = PeerAddress{"127.0.0.1", 1};
  EXPECT_EQ(TlsTransport::create(pki.credentials(0), pki.registry(), options).error().code,
            ErrorCode::kInvalidArgument);
  auto first = TlsTransport::create(pki.credentials(0), pki.registry(), tls_options(nullptr)).value();
  auto busy = tls_options(nullptr);
  busy.listen_port = first->port();
  // SO_REUSEADDR does not allow two listeners on one port.
  auto second = TlsTransport::create(pki.credentials(1), pki.registry(), busy);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, ErrorCode::kIo);
  EXPECT_NE(second.error().message.find(std::to_string(first->port())), std::string::npos);
}

}  // namespace
}  // namespace ballot::transport
