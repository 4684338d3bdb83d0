#include "transport/transport.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <numeric>
#include <thread>

#include "test_harness.h"

// Allocation probe: the largest single allocation while `g_probe` is on. Shows that an oversize
// length announced by a peer is rejected before anything is allocated for it. The replaced
// operator new allocates with malloc, so its operator delete frees with free: GCC's
// -Wmismatched-new-delete cannot see that the pair is replaced together.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
namespace {
std::atomic<bool> g_probe{false};
std::atomic<std::size_t> g_largest{0};
}  // namespace

void* operator new(std::size_t size) {
  if (g_probe.load(std::memory_order_relaxed)) {
    std::size_t seen = g_largest.load(std::memory_order_relaxed);
    while (size > seen && !g_largest.compare_exchange_weak(seen, size)) {
    }
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace ballot::transport {
namespace {

using namespace testing;

std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> bytes(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : bytes) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::uint8_t>(x);
  }
  return bytes;
}

std::vector<std::uint8_t> sealed(Signer& signer, MessageType type, std::uint64_t round,
                                 std::vector<std::uint8_t> payload) {
  return signer.seal(type, round, std::make_shared<const std::vector<std::uint8_t>>(std::move(payload))).to_bytes();
}

class TransportTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    if (GetParam() == Kind::kMemory)
      cluster_ = std::make_unique<MemoryCluster>(pki_);
    else
      cluster_ = std::make_unique<TlsCluster>(pki_);
  }

  // The honest node and the server still talk after whatever the attacker did.
  void expect_honest_traffic_works(std::uint64_t round = 0) {
    const auto payload = pattern(1000, static_cast<std::uint32_t>(99 + round));
    ASSERT_TRUE(cluster_->honest().send(0, MessageType::kVote, round, payload).ok());
    auto got = receive_from(cluster_->server(), 1);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    EXPECT_EQ(got->payload, payload);
    ASSERT_TRUE(cluster_->server().send(1, MessageType::kDecision, round, payload).ok());
    auto back = receive_from(cluster_->honest(), 0);
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(back->payload, payload);
  }
  // The next message from `from`, skipping none: anything else first is a test failure.
  Result<Message> receive_from(Transport& transport, NodeId from) {
    auto got = transport.receive(3000ms);
    if (got.ok()) {
      EXPECT_EQ(got->from, from);
    }
    return got;
  }
  void expect_nothing(Transport& transport) {
    auto got = transport.receive(150ms);
    EXPECT_FALSE(got.ok()) << "unexpected message from " << got->from;
  }
  std::uint64_t count(Misbehaviour kind, NodeId peer = 2) {
    return cluster_->server().misbehaviour_counts(peer)[static_cast<std::size_t>(kind)];
  }

  TestPki pki_{4};
  std::unique_ptr<Cluster> cluster_;
};

// Frames both ways at once, 0 .. 70 kB (vote pieces up, state transfers down: several per round
// are legitimate).
TEST_P(TransportTest, ManyFramesBothWays) {
  constexpr int kFrames = 200;
  auto size_of = [](int i) { return static_cast<std::size_t>((i * 7919) % 70000); };
  std::thread up([&] {
    for (int i = 0; i < kFrames; ++i)
      ASSERT_TRUE(cluster_->honest().send(0, MessageType::kVotePiece, 0, pattern(size_of(i), i)).ok());
  });
  std::thread down([&] {
    for (int i = 0; i < kFrames; ++i)
      ASSERT_TRUE(cluster_->server().send(1, MessageType::kStateTransfer, 0, pattern(size_of(i), 1000 + i)).ok());
  });
  std::uint64_t previous_sequence = 0;
  for (int i = 0; i < kFrames; ++i) {
    auto got = cluster_->server().receive(5000ms);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    EXPECT_EQ(got->from, 1u);
    EXPECT_EQ(got->type, MessageType::kVotePiece);
    EXPECT_EQ(got->payload, pattern(size_of(i), i)) << "frame " << i;  // in order, intact
    EXPECT_GT(got->sequence, previous_sequence);
    previous_sequence = got->sequence;
  }
  for (int i = 0; i < kFrames; ++i) {
    auto got = cluster_->honest().receive(5000ms);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    EXPECT_EQ(got->from, 0u);
    EXPECT_EQ(got->payload, pattern(size_of(i), 1000 + i)) << "frame " << i;
  }
  up.join();
  down.join();
  EXPECT_EQ(cluster_->observer().count(), 0u);
}

TEST_P(TransportTest, BroadcastAndLimits) {
  ASSERT_TRUE(cluster_->server().broadcast({1}, MessageType::kRoundStart, 0, pattern(16, 1)).ok());
  auto got = receive_from(cluster_->honest(), 0);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->type, MessageType::kRoundStart);
  EXPECT_EQ(cluster_->honest().send(9, MessageType::kVote, 0, {}).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(cluster_->honest().send(1, MessageType::kVote, 0, {}).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(cluster_->honest().send(0, MessageType::kHello, 0, std::vector<std::uint8_t>(5000)).error().code,
            ErrorCode::kInvalidArgument);
}

TEST_P(TransportTest, AttackerValidFrameIsDelivered) {
  cluster_->attacker_send(sealed(cluster_->attacker(), MessageType::kVote, 0, pattern(100, 5)));
  auto got = receive_from(cluster_->server(), 2);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->payload, pattern(100, 5));
}

TEST_P(TransportTest, ForgedSignatureIsDropped) {
  auto bytes = sealed(cluster_->attacker(), MessageType::kVote, 0, pattern(100, 5));
  bytes[kFrameHeaderSize + kSignedFieldsSize + 7] ^= 0x10;  // inside the signature
  cluster_->attacker_send(bytes);
  auto report = cluster_->observer().wait_for(Misbehaviour::kBadSignature);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->peer, 2u);
  EXPECT_EQ(report->error.code, ErrorCode::kAuthentication);
  EXPECT_EQ(count(Misbehaviour::kBadSignature), 1u);
  // A tampered payload under a valid signature is caught by the digest.
  auto tampered = sealed(cluster_->attacker(), MessageType::kVote, 0, pattern(100, 6));
  tampered.back() ^= 1;
  cluster_->attacker_send(tampered);
  // The frames are dropped, the session survives: the attacker's next valid frame arrives.
  cluster_->attacker_send(sealed(cluster_->attacker(), MessageType::kControl, 0, pattern(10, 7)));
  auto got = receive_from(cluster_->server(), 2);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->payload, pattern(10, 7));
  EXPECT_EQ(count(Misbehaviour::kBadSignature), 2u);
  expect_honest_traffic_works();
}

// Payloads of many digest leaves: the TLS session hashes them 16 leaves at a time while they
// arrive (leaf groups, a partial last group, a partial last leaf, exactly one group, a 1.4 MB
// sign vector); a byte changed in any group is caught.
TEST_P(TransportTest, LargePayloadsAreHashedWhileTheyArrive) {
  const std::vector<std::size_t> sizes = {1'400'000, 16 * kPayloadLeafSize, 16 * kPayloadLeafSize + 1,
                                          40 * kPayloadLeafSize + 777, 3 * kPayloadLeafSize};
  for (std::size_t i = 0; i < sizes.size(); ++i)
    ASSERT_TRUE(cluster_->honest().send(0, MessageType::kVotePiece, 0, pattern(sizes[i], 50 + i)).ok());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto got = cluster_->server().receive(10000ms);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    EXPECT_EQ(got->payload, pattern(sizes[i], 50 + i)) << "frame " << i;
  }
  for (const std::size_t at : {std::size_t{5}, 17 * kPayloadLeafSize + 3, 40 * kPayloadLeafSize + 700}) {
    auto tampered = sealed(cluster_->attacker(), MessageType::kVotePiece, 0, pattern(40 * kPayloadLeafSize + 777, 9));
    tampered[kFrameHeaderSize + kEnvelopeMetaSize + at] ^= 0x40;
    cluster_->attacker_send(tampered);
  }
  cluster_->attacker_send(sealed(cluster_->attacker(), MessageType::kControl, 0, pattern(10, 7)));
  auto got = receive_from(cluster_->server(), 2);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->payload, pattern(10, 7));  // the tampered frames were dropped, the session lives
  EXPECT_EQ(count(Misbehaviour::kBadSignature), 3u);
}

// A relay hands on another sender's envelope with its payload: any endpoint checks it against
// the author's key, whoever relayed it. A changed payload or round, or a node's envelope of a type
// only the server sends, fails; checking counts nothing against anyone.
TEST_P(TransportTest, RelayedEnvelopesAreCheckedAgainstTheirAuthor) {
  const auto payload = pattern(40000, 5);
  ASSERT_TRUE(cluster_->server().send(1, MessageType::kDecisionPiece, 0, payload).ok());
  auto got = receive_from(cluster_->honest(), 0);
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_TRUE(got->envelope.has_value());
  EXPECT_TRUE(cluster_->honest().check_relayed(*got->envelope, got->payload).ok());
  EXPECT_TRUE(cluster_->server().check_relayed(*got->envelope, got->payload).ok());
  auto changed = payload;
  changed[100] ^= 0x01;
  EXPECT_FALSE(cluster_->honest().check_relayed(*got->envelope, changed).ok());
  auto other_round = *got->envelope;
  other_round.header.round = 1;
  EXPECT_FALSE(cluster_->honest().check_relayed(other_round, payload).ok());
  const auto forged = cluster_->attacker().envelope_for(MessageType::kDecision, 0, payload);
  EXPECT_FALSE(cluster_->honest().check_relayed(forged, payload).ok());
  const auto counts = cluster_->honest().misbehaviour_counts(0);
  EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), std::uint64_t{0}), 0u);
  expect_honest_traffic_works();
}

TEST_P(TransportTest, ReplayedSequenceIsDropped) {
  const auto bytes = sealed(cluster_->attacker(), MessageType::kControl, 0, pattern(64, 8));
  cluster_->attacker_send(bytes);
  cluster_->attacker_send(bytes);
  ASSERT_TRUE(receive_from(cluster_->server(), 2).ok());
  auto report = cluster_->observer().wait_for(Misbehaviour::kReplay);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->error.code, ErrorCode::kReplay);
  EXPECT_EQ(report->peer, 2u);
  expect_nothing(cluster_->server());
  expect_honest_traffic_works();
}

TEST_P(TransportTest, OldRoundIsDropped) {
  cluster_->server().set_round(5);
  cluster_->honest().set_round(5);
  cluster_->attacker_send(sealed(cluster_->attacker(), MessageType::kVote, 4, pattern(64, 9)));
  auto report = cluster_->observer().wait_for(Misbehaviour::kStaleRound);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->error.code, ErrorCode::kReplay);
  cluster_->attacker_send(sealed(cluster_->attacker(), MessageType::kVote, 5, pattern(64, 10)));
  auto got = receive_from(cluster_->server(), 2);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->round, 5u);
  expect_honest_traffic_works(5);
}

TEST_P(TransportTest, EquivocationIsProved) {
  cluster_->attacker_send(sealed(cluster_->attacker(), MessageType::kPartitionSigns, 0, pattern(64, 11)));
  cluster_->attacker_send(sealed(cluster_->attacker(), MessageType::kPartitionSigns, 0, pattern(64, 12)));
  ASSERT_TRUE(receive_from(cluster_->server(), 2).ok());
  auto report = cluster_->observer().wait_for(Misbehaviour::kEquivocation);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->peer, 2u);
  expect_nothing(cluster_->server());
}

TEST_P(TransportTest, OversizeLengthAllocatesNothing) {
  FrameHeader header;
  header.type = MessageType::kPartitionSigns;
  header.flags = kFrameFlagSigned;
  header.meta_length = kEnvelopeMetaSize;
  header.payload_length = std::uint64_t{1} << 40;  // 1 TiB, far above the 64 MiB limit
  const auto encoded = encode_frame_header(header);
  g_largest = 0;
  g_probe = true;
  cluster_->attacker_send({encoded.begin(), encoded.end()});
  auto report = cluster_->observer().wait_for(Misbehaviour::kOversize);
  g_probe = false;
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->error.code, ErrorCode::kLimitExceeded);
  EXPECT_EQ(report->peer, 2u);
  EXPECT_LT(g_largest.load(), std::size_t{1} << 20) << "largest allocation while rejecting: " << g_largest.load();
  expect_honest_traffic_works();
}

TEST_P(TransportTest, TruncatedFrameIsRejected) {
  auto bytes = sealed(cluster_->attacker(), MessageType::kVote, 0, pattern(5000, 13));
  bytes.resize(bytes.size() / 2);
  cluster_->attacker_send(bytes);
  cluster_->attacker_close();  // the connection ends inside the frame
  auto report = cluster_->observer().wait_for(Misbehaviour::kTruncated);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->peer, 2u);
  EXPECT_EQ(report->error.code, ErrorCode::kMalformed);
  expect_nothing(cluster_->server());
  expect_honest_traffic_works();
}

TEST_P(TransportTest, MalformedHeaderIsRejected) {
  auto bytes = sealed(cluster_->attacker(), MessageType::kVote, 0, pattern(10, 14));
  bytes[4] = 99;  // protocol version
  cluster_->attacker_send(bytes);
  auto report = cluster_->observer().wait_for(Misbehaviour::kMalformedFrame);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->peer, 2u);
  expect_honest_traffic_works();
}

TEST_P(TransportTest, SenderMustBeTheSessionPeer) {
  // Node 2 relays a frame that node 1 signed: authentic, but not node 2's to send.
  Signer node1(pki_.credentials(1).key, kJob, 1, Role::kNode);
  cluster_->attacker_send(sealed(node1, MessageType::kVote, 0, pattern(10, 15)));
  auto report = cluster_->observer().wait_for(Misbehaviour::kIdentityMismatch);
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->peer, 2u);
  expect_nothing(cluster_->server());
  expect_honest_traffic_works();
}

INSTANTIATE_TEST_SUITE_P(Both, TransportTest, ::testing::Values(Kind::kMemory, Kind::kTls), kind_name);

}  // namespace
}  // namespace ballot::transport
