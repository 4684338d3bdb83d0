// The server session driven round by round, with the nodes played by hand over the in-memory
// transport.
#include "runtime/server_session.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "coding/codec_registry.h"
#include "robust/registry.h"
#include "runtime/checkpoint.h"
#include "runtime/messages.h"
#include "runtime/replica.h"
#include "transport/memory_transport.h"

namespace ballot::runtime {
namespace {

using transport::MessageType;
using namespace std::chrono_literals;

struct ServerHarness {
  TrainingSetup setup;
  std::shared_ptr<transport::MemoryNetwork> network = transport::MemoryNetwork::create();
  std::vector<std::unique_ptr<transport::MemoryTransport>> endpoints;  // 0: the server
  Replica replica;

  explicit ServerHarness(std::string model = "mlp:hidden=4", const std::function<void(TrainingOptions&)>& tweak = {})
      : setup(make(std::move(model), tweak)), replica(Replica::create(setup).value()) {
    transport::Registry registry;
    std::vector<transport::LocalIdentity> identities;
    for (transport::NodeId id = 0; id <= setup.options.nodes; ++id) {
      auto key = transport::SigningKey::generate().value();
      const auto role = id == 0 ? transport::Role::kServer : transport::Role::kNode;
      EXPECT_TRUE(registry.add(id, role, key.verify_key()).ok());
      identities.push_back({id, role, key});
    }
    transport::TransportOptions options;
    options.job = setup.options.job;
    for (auto& identity : identities) endpoints.push_back(network->attach(identity, registry, options).value());
  }

  static TrainingSetup make(std::string model, const std::function<void(TrainingOptions&)>& tweak) {
    TrainingOptions options;
    options.nodes = 3;
    options.byzantine = 1;
    options.code = "identity";
    options.model = std::move(model);
    options.data = "synthetic:examples=200,features=8,classes=2";
    options.rounds = 5;
    options.eval_every = 0;
    options.partition_size = 4;
    if (tweak) tweak(options);
    auto data = load_training_data(options).value();
    return make_training_setup(options, std::make_shared<const learning::TrainTestSplit>(std::move(data))).value();
  }

  ServerSessionOptions options(std::chrono::milliseconds deadline = 2000ms) {
    ServerSessionOptions o;
    o.round_deadline = deadline;
    o.quorum_timeout = 2000ms;
    o.join_wait = 1ms;
    return o;
  }
  transport::Transport& node(std::size_t i) { return *endpoints[i + 1]; }
  void vote(std::size_t i, std::uint64_t round, const transport::Digest& digest, bool sign, double loss = 0.5) {
    ASSERT_TRUE(node(i)
                    .send(kServerId, MessageType::kVote, round,
                          encode(Vote{round, loss, digest, BitVector(replica.dimension(), sign)}))
                    .ok());
  }
  // begin, then round 0 with every node's vote on the current model, collected and decided.
  std::vector<std::uint8_t> decide_round_zero(ServerSession& session) {
    EXPECT_TRUE(session.begin(0).ok());
    EXPECT_TRUE(session.open_round(0).ok());
    for (std::size_t i = 0; i < setup.options.nodes; ++i) vote(i, 0, replica.state_digest(), true);
    EXPECT_TRUE(session.collect().ok());
    auto payload = session.decide();
    EXPECT_TRUE(payload.ok()) << payload.error().to_string();
    return payload.ok() ? std::move(*payload) : std::vector<std::uint8_t>{};
  }
  // The next message node i gets of `type` (others are skipped).
  std::optional<transport::Message> next(std::size_t i, MessageType type) {
    for (auto message = node(i).receive(500ms); message.ok(); message = node(i).receive(500ms)) {
      if (message->type == type) return std::move(*message);
    }
    return std::nullopt;
  }
};

TEST(ServerSessionTest, DecidesTheMajorityOfTheVotes) {
  ServerHarness h;
  ServerSession session(h.setup, *h.endpoints[0], h.replica, h.options());
  ASSERT_TRUE(session.begin(0).ok());
  const auto digest = h.replica.state_digest();
  ASSERT_TRUE(session.open_round(0).ok());
  for (std::size_t i = 0; i < 3; ++i) {
    auto start = h.next(i, MessageType::kRoundStart);
    ASSERT_TRUE(start);
    EXPECT_EQ(decode_round_start(start->payload)->model_digest, digest);
  }
  h.vote(0, 0, digest, true);
  h.vote(1, 0, digest, true);
  h.vote(2, 0, digest, false);
  ASSERT_TRUE(session.collect().ok());
  auto payload = session.decide();
  ASSERT_TRUE(payload.ok());
  auto decision = decode_decision(*payload, h.replica.dimension());
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(decision->signs, BitVector(h.replica.dimension(), true));
  EXPECT_EQ(session.report().votes, 3u);
  EXPECT_TRUE(session.report().missing.empty());
  EXPECT_EQ(h.replica.state_digest(), digest);  // not applied before the caller sends it
  ASSERT_TRUE(session.send_decision(*payload).ok());
  auto sent = h.next(0, MessageType::kDecision);
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->payload, *payload);
  session.apply_decision();
  const auto applied = h.replica.state_digest();
  EXPECT_NE(applied, digest);
  session.apply_decision();  // once
  EXPECT_EQ(h.replica.state_digest(), applied);
}

// The loss a vote reports is a metric a Byzantine node writes: a NaN or an infinity is left out of
// the round's mean (which is NaN only when no vote has a finite loss); the vote itself counts.
TEST(ServerSessionTest, ANonFiniteLossDoesNotPoisonTheRoundsMeanLoss) {
  ServerHarness h;
  ServerSession session(h.setup, *h.endpoints[0], h.replica, h.options());
  ASSERT_TRUE(session.begin(0).ok());
  const auto digest = h.replica.state_digest();
  ASSERT_TRUE(session.open_round(0).ok());
  h.vote(0, 0, digest, true, 0.25);
  h.vote(1, 0, digest, true, std::numeric_limits<double>::quiet_NaN());
  h.vote(2, 0, digest, false, -std::numeric_limits<double>::infinity());
  ASSERT_TRUE(session.collect().ok());
  ASSERT_TRUE(session.decide().ok());
  EXPECT_EQ(session.report().votes, 3u);
  EXPECT_EQ(session.report().mean_loss, 0.25);
  session.apply_decision();

  ASSERT_TRUE(session.open_round(1).ok());
  for (std::size_t i = 0; i < 3; ++i)
    h.vote(i, 1, h.replica.state_digest(), true, std::numeric_limits<double>::infinity());
  ASSERT_TRUE(session.collect().ok());
  ASSERT_TRUE(session.decide().ok());
  EXPECT_EQ(session.report().votes, 3u);
  EXPECT_TRUE(std::isnan(session.report().mean_loss));
}

// A caller that does not apply the decision gets it applied by the next round's start, whose
// RoundStart then carries the digest after the decision (as a node computes it).
// A vote that arrives in pieces (in any order) counts once whole, as the same vote sent whole;
// pieces that contradict the ones held are dropped against the sender, and a vote whose pieces do
// not all arrive is missing.
// The gradient path with a sparsifying codec: the server keeps each message as its entries and
// decides what its rule gives over the decoded vectors, byte for byte; a message cut short is
// dropped against its sender.
TEST(ServerSessionTest, SparseMessagesAreDecidedAsTheirDecodedVectors) {
  for (const std::string rule : {"mean", "median"}) {
    ServerHarness h("mlp:hidden=64", [&](TrainingOptions& o) {
      o.rule = rule;
      o.codec = "topk:ratio=0.1";
      o.update = "sgd";
    });
    ServerSession session(h.setup, *h.endpoints[0], h.replica, h.options(300ms));
    ASSERT_TRUE(session.begin(0).ok());
    ASSERT_TRUE(session.open_round(0).ok());
    const auto& layout = h.replica.model().layout();
    auto codec = coding::make_codec("topk:ratio=0.1").value();
    std::vector<std::vector<float>> decoded;
    for (std::size_t i = 0; i < 3; ++i) {
      Rng rng(i + 1);
      std::vector<float> gradient(h.replica.dimension());
      for (auto& v : gradient) v = static_cast<float>(rng.normal());
      gradient[i] = -0.0f;  // a −0 that a node may send
      auto bytes = codec->encode(gradient, layout, rng).bytes;
      if (i == 2) {
        bytes.pop_back();
      } else {
        decoded.push_back(codec->decode(bytes, layout).value());
      }
      ASSERT_TRUE(h.node(i)
                      .send(kServerId, MessageType::kVote, 0,
                            encode(EncodedVote{0, 0.5, h.replica.state_digest(), std::move(bytes)}))
                      .ok());
    }
    ASSERT_TRUE(session.collect().ok());
    auto payload = session.decide();
    ASSERT_TRUE(payload.ok()) << payload.error().to_string();
    auto reference = robust::make_aggregator(rule).value()->aggregate(robust::InputMatrix::from_rows(decoded).value());
    ASSERT_TRUE(reference.ok());
    EXPECT_EQ(*payload,
              encode(FloatDecision{0, h.replica.scale(0), h.replica.full_digest_after(0), std::move(reference->value)}))
        << rule;
    EXPECT_EQ(session.report().votes, 2u);
    EXPECT_EQ(session.report().rejected_messages, 1u);
  }
}

TEST(ServerSessionTest, AVoteInPiecesCountsOnceWholeAndContradictionsAreRejected) {
  ServerHarness h("mlp:hidden=40");  // d = 442: 7 words
  const std::size_t d = h.replica.dimension();
  ASSERT_EQ(BitVector::words_for(d), 7u);
  BitVector pattern(d);
  for (std::size_t i = 0; i < d; ++i) pattern.set(i, i % 5 < 2);
  const auto digest = h.replica.state_digest();
  const auto piece = [&](std::uint64_t round, std::uint32_t index, std::uint32_t count, double loss = 0.5) {
    const std::size_t begin = vote_piece_word(7, index, count), end = vote_piece_word(7, index + 1, count);
    return encode(
        VotePiece{round, loss, digest, d, index, count,
                  std::vector<std::uint64_t>(pattern.words().begin() + begin, pattern.words().begin() + end)});
  };
  ServerSession session(h.setup, *h.endpoints[0], h.replica, h.options(300ms));
  ASSERT_TRUE(session.begin(0).ok());
  ASSERT_TRUE(session.open_round(0).ok());
  // Nodes 0 and 1 disagree everywhere, so node 2's vote is the decision.
  h.vote(0, 0, digest, true);
  h.vote(1, 0, digest, false);
  auto& node = h.node(2);
  ASSERT_TRUE(node.send(kServerId, MessageType::kVotePiece, 0, piece(0, 2, 3)).ok());
  ASSERT_TRUE(node.send(kServerId, MessageType::kVotePiece, 0, piece(0, 0, 3)).ok());
  ASSERT_TRUE(node.send(kServerId, MessageType::kVotePiece, 0, piece(0, 1, 3, 0.75)).ok());  // another loss
  ASSERT_TRUE(node.send(kServerId, MessageType::kVotePiece, 0, piece(0, 1, 4)).ok());        // another count
  ASSERT_TRUE(node.send(kServerId, MessageType::kVotePiece, 0, {1, 2, 3}).ok());             // no piece
  ASSERT_TRUE(node.send(kServerId, MessageType::kVotePiece, 0, piece(0, 1, 3)).ok());
  ASSERT_TRUE(session.collect().ok());
  auto payload = session.decide();
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(decode_decision(*payload, d)->signs, pattern);
  EXPECT_EQ(session.report().votes, 3u);
  EXPECT_EQ(session.report().rejected_messages, 3u);
  EXPECT_EQ(session.report().bytes_per_vote, piece(0, 0, 3).size() + piece(0, 1, 3).size() + piece(0, 2, 3).size());
  ASSERT_TRUE(session.send_decision(*payload).ok());

  // Round 1: node 2 sends two of its three pieces: its vote is missing.
  ASSERT_TRUE(session.open_round(1).ok());
  h.vote(0, 1, h.replica.state_digest(), true);
  h.vote(1, 1, h.replica.state_digest(), true);
  ASSERT_TRUE(node.send(kServerId, MessageType::kVotePiece, 1, piece(1, 0, 3)).ok());
  ASSERT_TRUE(node.send(kServerId, MessageType::kVotePiece, 1, piece(1, 1, 3)).ok());
  ASSERT_TRUE(session.collect().ok());
  ASSERT_TRUE(session.decide().ok());
  EXPECT_EQ(session.report().votes, 2u);
  EXPECT_EQ(session.report().missing, std::vector<std::size_t>{2});
}

// A vote read after its round was decided (sent in time, read late) is lateness, never evidence:
// a whole vote counts once, a vote in pieces once (its piece 0), and nothing is rejected.
TEST(ServerSessionTest, VotesAndVotePiecesOfADecidedRoundCountAsLateOnce) {
  ServerHarness h("mlp:hidden=40");
  const std::size_t d = h.replica.dimension(), words = BitVector::words_for(d);
  const auto digest = h.replica.state_digest();
  ServerSession session(h.setup, *h.endpoints[0], h.replica, h.options(300ms));
  ASSERT_TRUE(session.begin(0).ok());
  ASSERT_TRUE(session.open_round(0).ok());
  h.vote(0, 0, digest, true);
  h.vote(1, 0, digest, true);
  ASSERT_TRUE(session.collect().ok());  // the quorum (2 of 3) by the deadline: node 2 is missing
  auto payload = session.decide();
  ASSERT_TRUE(payload.ok());
  EXPECT_EQ(session.report().missing, std::vector<std::size_t>{2});
  ASSERT_TRUE(session.send_decision(*payload).ok());
  // Node 2's round-0 vote in three pieces, and node 0's again whole, arrive after the decision.
  for (std::uint32_t index = 0; index < 3; ++index) {
    const std::size_t begin = vote_piece_word(words, index, 3), end = vote_piece_word(words, index + 1, 3);
    ASSERT_TRUE(h.node(2)
                    .send(kServerId, MessageType::kVotePiece, 0,
                          encode(VotePiece{0, 0.5, digest, d, index, 3, std::vector<std::uint64_t>(end - begin, 0)}))
                    .ok());
  }
  h.vote(0, 0, digest, true);
  ASSERT_TRUE(session.open_round(1).ok());
  for (std::size_t i = 0; i < 3; ++i) h.vote(i, 1, h.replica.state_digest(), true);
  ASSERT_TRUE(session.collect().ok());
  ASSERT_TRUE(session.decide().ok());
  EXPECT_EQ(session.report().votes, 3u);
  EXPECT_EQ(session.report().late_votes, 2u);
  EXPECT_EQ(session.report().rejected_messages, 0u);
}

TEST(ServerSessionTest, TheNextRoundStartsFromTheAppliedDecision) {
  ServerHarness h;
  ServerSession session(h.setup, *h.endpoints[0], h.replica, h.options(200ms));
  const auto payload = h.decide_round_zero(session);
  Replica twin = Replica::create(h.setup).value();
  ASSERT_TRUE(twin.apply_decision(0, payload, h.setup.sign_vote()).ok());
  ASSERT_TRUE(session.send_decision(payload).ok());
  ASSERT_TRUE(session.open_round(1).ok());
  EXPECT_EQ(h.replica.state_digest(), twin.state_digest());
  while (auto start = h.next(0, MessageType::kRoundStart)) {
    if (start->round == 1) {
      EXPECT_EQ(decode_round_start(start->payload)->model_digest, twin.state_digest());
      return;
    }
  }
  ADD_FAILURE() << "no RoundStart of round 1";
}

TEST(ServerSessionTest, AVoteOnAnotherModelGetsTheStateAndAMalformedOneIsDropped) {
  ServerHarness h;
  ServerSession session(h.setup, *h.endpoints[0], h.replica, h.options(200ms));
  ASSERT_TRUE(session.begin(0).ok());
  const auto digest = h.replica.state_digest();
  ASSERT_TRUE(session.open_round(0).ok());
  h.vote(0, 0, digest, true);
  transport::Digest other = digest;
  other[0] ^= 1;
  h.vote(1, 0, other, true);
  ASSERT_TRUE(h.node(2).send(kServerId, MessageType::kControl, 0, {1, 2, 3}).ok());  // no such control message
  h.vote(2, 0, digest, false);
  ASSERT_TRUE(session.collect().ok());  // the deadline passes with the quorum of two
  ASSERT_TRUE(session.decide().ok());
  EXPECT_EQ(session.report().votes, 2u);
  EXPECT_EQ(session.report().out_of_sync, std::vector<std::size_t>{1});
  EXPECT_EQ(session.report().rejected_messages, 1u);
  auto state = h.next(1, MessageType::kStateTransfer);
  ASSERT_TRUE(state);
  EXPECT_EQ(decode_checkpoint(state->payload)->round, 0u);
}

// A node cut off from the server re-sends its Join every two deadlines; when its link returns, all
// of them arrive at once. It gets the state once in the round, and the round's start for each.
TEST(ServerSessionTest, ABurstOfJoinsGetsTheStateOncePerRound) {
  ServerHarness h;
  ServerSession session(h.setup, *h.endpoints[0], h.replica, h.options(200ms));
  ASSERT_TRUE(session.send_decision(h.decide_round_zero(session)).ok());
  while (h.node(2).receive(50ms).ok()) {
  }
  ASSERT_TRUE(session.open_round(1).ok());
  h.node(2).set_round(1);
  for (int k = 0; k < 5; ++k) ASSERT_TRUE(h.node(2).send(kServerId, MessageType::kControl, 1, encode(Join{0})).ok());
  h.vote(0, 1, h.replica.state_digest(), true);
  h.vote(1, 1, h.replica.state_digest(), true);
  ASSERT_TRUE(session.collect().ok());  // the deadline passes with the quorum of two
  std::size_t states = 0, starts = 0;
  for (auto message = h.node(2).receive(200ms); message.ok(); message = h.node(2).receive(200ms)) {
    if (message->type == MessageType::kStateTransfer) {
      ++states;
      EXPECT_EQ(decode_checkpoint(message->payload)->round, 1u);
    }
    if (message->type == MessageType::kRoundStart) ++starts;
  }
  EXPECT_EQ(states, 1u);
  EXPECT_EQ(starts, 1u + 5u);  // open_round's broadcast and one per Join
}

// A node whose vote did not count is absent until it is heard from: once the quorum is in, the
// next rounds do not wait the deadline for it (a dead node costs one deadline in
// kAbsentProbeEvery rounds, not one per round), but for the probe every kAbsentProbeEvery rounds;
// a message from it (here a Join) makes it waited for again.
TEST(ServerSessionTest, ANodeNotHeardFromIsWaitedForOnlyInProbeRounds) {
  ServerHarness h("mlp:hidden=4", [](TrainingOptions& o) { o.rounds = 20; });
  constexpr auto kDeadline = 400ms;
  auto options = h.options(kDeadline);
  options.skip_absent = true;
  ServerSession session(h.setup, *h.endpoints[0], h.replica, options);
  ASSERT_TRUE(session.begin(0).ok());
  const auto collect_round = [&](std::uint64_t round) {
    const auto started = std::chrono::steady_clock::now();  // the deadline runs from open_round
    EXPECT_TRUE(session.open_round(round).ok());
    h.vote(0, round, h.replica.state_digest(), true);
    h.vote(1, round, h.replica.state_digest(), true);
    EXPECT_TRUE(session.collect().ok());
    const auto waited = std::chrono::steady_clock::now() - started;
    auto payload = session.decide();
    EXPECT_TRUE(payload.ok());
    EXPECT_EQ(session.report().missing, std::vector<std::size_t>{2});
    EXPECT_TRUE(session.send_decision(std::move(*payload)).ok());
    session.apply_decision();
    return waited;
  };
  EXPECT_GE(collect_round(0), kDeadline);  // node 2 was expected
  for (std::uint64_t round = 1; round < kAbsentProbeEvery; ++round) {
    EXPECT_LT(collect_round(round), kDeadline) << round;  // absent: not waited for
  }
  EXPECT_GE(collect_round(kAbsentProbeEvery), kDeadline);  // the probe
  EXPECT_LT(collect_round(kAbsentProbeEvery + 1), kDeadline);
  const std::uint64_t joined = kAbsentProbeEvery + 2;
  ASSERT_TRUE(
      h.node(2).send(kServerId, MessageType::kControl, joined, encode(Join{joined, h.replica.state_digest()})).ok());
  EXPECT_GE(collect_round(joined), kDeadline);  // heard from: waited for again
}

TEST(ServerSessionTest, NoQuorumIsATimeout) {
  ServerHarness h;
  auto options = h.options(50ms);
  options.quorum_timeout = 100ms;
  ServerSession session(h.setup, *h.endpoints[0], h.replica, options);
  ASSERT_TRUE(session.begin(0).ok());
  ASSERT_TRUE(session.open_round(0).ok());
  h.vote(0, 0, h.replica.state_digest(), true);
  EXPECT_EQ(session.collect().error().code, ErrorCode::kTimeout);
}

}  // namespace
}  // namespace ballot::runtime
