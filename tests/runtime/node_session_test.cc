// The node session driven by hand over the in-memory transport: the test plays the server (and,
// for the seam, the adversary) and checks what the node sends at each step.
#include "runtime/node_session.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <optional>
#include <thread>
#include <utility>

#include "coding/codec.h"
#include "coding/codec_registry.h"
#include "runtime/checkpoint.h"
#include "runtime/messages.h"
#include "runtime/node_worker.h"
#include "runtime/replica.h"
#include "transport/memory_transport.h"

namespace ballot::runtime {
namespace {

using transport::MessageType;
using namespace std::chrono_literals;

struct SessionHarness {
  TrainingSetup setup;
  std::shared_ptr<transport::MemoryNetwork> network = transport::MemoryNetwork::create();
  std::vector<std::unique_ptr<transport::MemoryTransport>> endpoints;  // 0: the server
  Replica replica;

  transport::Registry registry;
  std::vector<transport::LocalIdentity> identities;
  transport::TransportOptions options;

  explicit SessionHarness(std::string rule = "vote", Placement placement = Placement::kReplicated,
                          std::string model = "mlp:hidden=4", std::string codec = "fp32")
      : setup(make(std::move(rule), placement, std::move(model), std::move(codec))),
        replica(Replica::create(setup).value()) {
    for (transport::NodeId id = 0; id <= setup.options.nodes; ++id) {
      auto key = transport::SigningKey::generate().value();
      const auto role = id == 0 ? transport::Role::kServer : transport::Role::kNode;
      EXPECT_TRUE(registry.add(id, role, key.verify_key()).ok());
      identities.push_back({id, role, key});
    }
    options.job = setup.options.job;
    for (auto& identity : identities) endpoints.push_back(network->attach(identity, registry, options).value());
  }

  // The server process dies and starts again: a new endpoint, with nothing of the old one's state.
  void restart_server() {
    endpoints[0].reset();
    endpoints[0] = network->attach(identities[0], registry, options).value();
  }

  static TrainingSetup make(std::string rule, Placement placement, std::string model, std::string codec) {
    TrainingOptions options;
    options.placement = placement;
    options.nodes = 3;
    options.byzantine = 1;
    options.code = placement == Placement::kExchange ? "bernoulli:r=3" : "identity";
    options.model = std::move(model);
    options.data = "synthetic:examples=200,features=8,classes=2";
    options.rounds = 5;
    options.eval_every = 0;
    options.partition_size = 4;
    options.rule = std::move(rule);
    options.codec = std::move(codec);

    auto data = load_training_data(options).value();
    return make_training_setup(options, std::make_shared<const learning::TrainTestSplit>(std::move(data))).value();
  }

  transport::Transport& server() { return *endpoints[0]; }
  // The next message the server gets from node 0 of `type` (others are skipped).
  transport::Message expect(MessageType type) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto message = server().receive(500ms);
      if (!message.ok()) break;
      if (message->type == type) return std::move(*message);
    }
    ADD_FAILURE() << "no " << transport::message_type_name(type) << " arrived";
    return {};
  }
  void start_round(std::uint64_t round) {
    ASSERT_TRUE(
        server()
            .send(node_id(0), MessageType::kRoundStart, round, encode(RoundStart{round, 3000, replica.state_digest()}))
            .ok());
  }
};

// poll_for: what has arrived is handled; with nothing to handle it returns nothing once its wait
// passed (0: at once), and sends no Join before join_retry.
TEST(NodeSessionTest, PollForReturnsNothingWhenIdleAndTheEventWhenThereIsOne) {
  SessionHarness h;
  NodeSessionOptions options;
  options.join_retry = 10s;
  NodeSession session(h.setup, 0, *h.endpoints[1], h.replica, options);
  ASSERT_TRUE(session.start().ok());
  ASSERT_TRUE(std::holds_alternative<Join>(decode_control(h.expect(MessageType::kControl).payload).value()));
  const auto started = std::chrono::steady_clock::now();
  auto idle = session.poll_for(0ms);
  ASSERT_TRUE(idle.ok()) << idle.error().to_string();
  EXPECT_FALSE(idle->has_value());
  auto waited = session.poll_for(50ms);
  ASSERT_TRUE(waited.ok());
  EXPECT_FALSE(waited->has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - started, 50ms);
  EXPECT_EQ(h.server().receive(0ms).error().code, ErrorCode::kTimeout);  // no second Join yet

  h.start_round(0);
  auto event = session.poll_for(0ms);  // the start has arrived: no wait needed
  ASSERT_TRUE(event.ok() && event->has_value());
  EXPECT_EQ((*event)->kind, NodeEvent::Kind::kCompute);
  EXPECT_EQ((*event)->work.round, 0u);
}

TEST(NodeSessionTest, DrivesOneRoundByHand) {
  SessionHarness h;
  NodeSession session(h.setup, 0, *h.endpoints[1], h.replica);
  ASSERT_TRUE(session.start().ok());
  auto join = decode_control(h.expect(MessageType::kControl).payload);
  ASSERT_TRUE(join.ok() && std::holds_alternative<Join>(*join));

  h.start_round(0);
  auto event = session.next_round();
  ASSERT_TRUE(event.ok()) << event.error().to_string();
  ASSERT_EQ(event->kind, NodeEvent::Kind::kCompute);
  EXPECT_EQ(event->work.kind, RoundWork::Kind::kVote);
  EXPECT_EQ(event->work.round, 0u);
  EXPECT_EQ(event->work.partitions, std::vector<std::uint32_t>{0});  // its row of the identity code
  EXPECT_EQ(event->work.model_digest, h.replica.state_digest());

  NodeWorker worker(h.setup, 0);
  BitVector signs;
  const double loss = worker.vote(h.replica, 0, signs);
  ASSERT_TRUE(session.submit_vote(loss, signs).ok());
  auto vote = decode_vote(h.expect(MessageType::kVote).payload, h.replica.dimension());
  ASSERT_TRUE(vote.ok());
  EXPECT_EQ(vote->round, 0u);
  EXPECT_EQ(vote->signs, signs);
  EXPECT_EQ(vote->model_digest, h.replica.state_digest());

  // A repeated round start (the server answers every Join with one) asks for nothing new.
  h.start_round(0);
  const BitVector decided(h.replica.dimension(), true);
  ASSERT_TRUE(h.server()
                  .send(node_id(0), MessageType::kDecision, 0,
                        encode(Decision{0, h.replica.scale(0), h.replica.full_digest_after(0), decided}))
                  .ok());
  auto applied = session.await_decision();
  ASSERT_TRUE(applied.ok());
  EXPECT_EQ(applied->kind, NodeEvent::Kind::kDecided);
  EXPECT_EQ(applied->round, 1u);
  EXPECT_EQ(session.round(), 1u);
  EXPECT_EQ(session.stats().votes_sent, 1u);

  h.server().set_round(1);
  ASSERT_TRUE(h.server().send(node_id(0), MessageType::kControl, 1, encode(Finish{1})).ok());
  auto finished = session.next_round();
  ASSERT_TRUE(finished.ok());
  EXPECT_EQ(finished->kind, NodeEvent::Kind::kFinished);
}

TEST(NodeSessionTest, AStartOnAnotherModelAsksForTheStateAndInstallsIt) {
  SessionHarness h;
  Replica node_replica = Replica::create(h.setup).value();
  NodeSession session(h.setup, 1, *h.endpoints[2], node_replica);
  ASSERT_TRUE(session.start().ok());
  // The server's model moved on: its round start names another digest.
  const BitVector decided(h.replica.dimension(), true);
  h.replica.apply(0, decided);
  ASSERT_TRUE(h.server()
                  .send(node_id(1), MessageType::kRoundStart, 0, encode(RoundStart{0, 3000, h.replica.state_digest()}))
                  .ok());
  Checkpoint state;
  state.round = 1;
  h.replica.save_to(state);
  ASSERT_TRUE(h.server().send(node_id(1), MessageType::kStateTransfer, 0, encode_checkpoint(state)).ok());
  auto event = session.poll();
  ASSERT_TRUE(event.ok());
  EXPECT_EQ(event->kind, NodeEvent::Kind::kStateInstalled);
  EXPECT_TRUE(event->moved);
  EXPECT_EQ(event->round, 1u);
  EXPECT_EQ(node_replica.digest(), h.replica.digest());
  EXPECT_EQ(session.stats().rejoins, 1u);
}

// The server decided round r and died; restarted from its checkpoint of round r it sends every
// node that state, which rewinds a node to the round it voted in. The node's vote went down with
// the old process, so it sends it again: the same signed frame, not a vote computed anew.
// The vote in pieces, folded by range as a framework's backward produces the gradient: the
// pieces the server gets make the vote fold/folded_vote give, and the round counts as voted once
// the last piece is out. A piece that breaks the rules is refused with nothing sent; a second
// process with the same signed record abstains in that round.
TEST(NodeSessionTest, AVoteInPiecesIsTheWholeVoteAndARestartedNodeAbstains) {
  SessionHarness h("vote", Placement::kReplicated, "mlp:hidden=40");  // d = 442: 7 words
  const std::size_t d = h.replica.dimension(), words = BitVector::words_for(d);
  const auto record = std::filesystem::path(::testing::TempDir()) / "vote_pieces.record";
  std::filesystem::remove(record);
  NodeSessionOptions options;
  options.record_path = record;
  std::optional<NodeSession> session;
  session.emplace(h.setup, 0, *h.endpoints[1], h.replica, options);
  ASSERT_TRUE(session->start().ok());
  h.expect(MessageType::kControl);  // Join
  h.start_round(0);
  auto event = session->next_round();
  ASSERT_TRUE(event.ok() && event->kind == NodeEvent::Kind::kCompute);

  // The gradient the whole path folds, and the same folded in two ranges (the later one first).
  std::vector<float> gradient(d);
  for (std::size_t i = 0; i < d; ++i) gradient[i] = static_cast<float>((i * 37) % 11) - 5.0f;
  NodeWorker whole(h.setup, 0), pieces(h.setup, 0);
  ASSERT_TRUE(whole.fold(0, gradient).ok());
  BitVector expected;
  whole.folded_vote(d, expected);
  const std::span<const float> all(gradient);
  ASSERT_TRUE(pieces.fold_range(0, d, 256, all.subspan(256)).ok());
  ASSERT_TRUE(pieces.fold_range(0, d, 0, all.first(256)).ok());
  EXPECT_EQ(pieces.fold_range(0, d, 100, all.subspan(100, 28)).error().code, ErrorCode::kInvalidArgument);
  // An offset whose end would wrap past 2^64 to a small number.
  const std::size_t wrapping = std::numeric_limits<std::size_t>::max() - 63;
  EXPECT_EQ(pieces.fold_range(0, d, wrapping, all.first(64)).error().code, ErrorCode::kInvalidArgument);

  const auto piece_words = [&](std::uint32_t index, std::uint32_t count) {
    return pieces.folded_vote_words(d, vote_piece_word(words, index, count), vote_piece_word(words, index + 1, count));
  };
  EXPECT_EQ(session->submit_vote_piece(0.5, 0, 3, piece_words(2, 3)).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(session->submit_vote_piece(0.5, 3, 3, {}).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(session->submit_vote_piece(0.5, 0, 8, {}).error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(session->submit_vote_piece(0.5, 2, 3, piece_words(2, 3)).ok());
  EXPECT_EQ(session->submit_vote_piece(0.5, 2, 3, piece_words(2, 3)).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(session->submit_vote_piece(0.75, 0, 3, piece_words(0, 3)).error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(session->submit_vote_piece(0.5, 0, 3, piece_words(0, 3)).ok());
  EXPECT_EQ(session->stats().votes_sent, 0u);
  ASSERT_TRUE(session->submit_vote_piece(0.5, 1, 3, piece_words(1, 3)).ok());
  EXPECT_EQ(session->stats().votes_sent, 1u);

  VoteAssembly assembly;
  std::optional<Vote> vote;
  for (int k = 0; k < 3; ++k) {
    auto piece = decode_vote_piece(h.expect(MessageType::kVotePiece).payload, d);
    ASSERT_TRUE(piece.ok()) << piece.error().to_string();
    auto added = assembly.add(*piece);
    ASSERT_TRUE(added.ok());
    if (*added) vote = std::move(**added);
  }
  ASSERT_TRUE(vote);
  EXPECT_EQ(vote->signs, expected);
  EXPECT_EQ(vote->round, 0u);
  EXPECT_EQ(vote->loss, 0.5);
  EXPECT_EQ(vote->model_digest, h.replica.state_digest());
  EXPECT_EQ(h.server().receive(50ms).error().code, ErrorCode::kTimeout);  // nothing else
  // Voted: a repeated start asks for nothing.
  h.start_round(0);
  auto idle = session->poll_for(100ms);
  ASSERT_TRUE(idle.ok());
  EXPECT_FALSE(idle->has_value());

  // The node process restarts in round 0 (its signed record survives): it abstains there.
  session.reset();
  h.endpoints[1].reset();
  h.endpoints[1] = h.network->attach(h.identities[1], h.registry, h.options).value();
  session.emplace(h.setup, 0, *h.endpoints[1], h.replica, options);
  ASSERT_TRUE(session->start().ok());
  h.start_round(0);
  event = session->next_round();
  ASSERT_TRUE(event.ok() && event->kind == NodeEvent::Kind::kCompute);
  ASSERT_TRUE(session->submit_vote_piece(0.5, 0, 3, piece_words(0, 3)).ok());
  ASSERT_TRUE(session->submit_vote_piece(0.5, 1, 3, piece_words(1, 3)).ok());  // the round is over: ignored
  EXPECT_EQ(session->stats().abstained, 1u);
  EXPECT_EQ(session->stats().votes_sent, 0u);
  for (auto message = h.server().receive(100ms); message.ok(); message = h.server().receive(100ms)) {
    EXPECT_NE(message->type, MessageType::kVotePiece);
  }
}

TEST(NodeSessionTest, AServerRestartedFromAnOlderRoundGetsTheSameSignedVoteAgain) {
  SessionHarness h;
  Replica node_replica = Replica::create(h.setup).value();
  NodeSessionOptions options;
  options.idle_timeout = 10s;
  NodeSession session(h.setup, 0, *h.endpoints[1], node_replica, options);
  ASSERT_TRUE(session.start().ok());
  h.expect(MessageType::kControl);  // Join
  Checkpoint state;                 // the server's checkpoint of round 0, before any decision
  state.round = 0;
  h.replica.save_to(state);
  h.start_round(0);
  auto event = session.next_round();
  ASSERT_TRUE(event.ok() && event->kind == NodeEvent::Kind::kCompute);
  NodeWorker worker(h.setup, 0);
  BitVector signs;
  const double loss = worker.vote(node_replica, 0, signs);
  ASSERT_TRUE(session.submit_vote(loss, signs).ok());
  const auto first = h.expect(MessageType::kVote);
  const BitVector decided(h.replica.dimension(), true);
  ASSERT_TRUE(h.server()
                  .send(node_id(0), MessageType::kDecision, 0,
                        encode(Decision{0, h.replica.scale(0), h.replica.full_digest_after(0), decided}))
                  .ok());
  auto applied = session.await_decision();
  ASSERT_TRUE(applied.ok() && applied->kind == NodeEvent::Kind::kDecided);
  ASSERT_EQ(session.round(), 1u);

  h.restart_server();
  ASSERT_TRUE(h.server().send(node_id(0), MessageType::kStateTransfer, 0, encode_checkpoint(state)).ok());
  auto installed = session.poll();
  ASSERT_TRUE(installed.ok());
  EXPECT_EQ(installed->kind, NodeEvent::Kind::kStateInstalled);
  EXPECT_TRUE(installed->moved);
  EXPECT_EQ(session.round(), 0u);
  h.expect(MessageType::kControl);  // its Join
  h.start_round(0);
  ASSERT_TRUE(h.server()
                  .send(node_id(0), MessageType::kDecision, 0,
                        encode(Decision{0, h.replica.scale(0), h.replica.full_digest_after(0), decided}))
                  .ok());
  auto again_applied = session.await_decision();
  ASSERT_TRUE(again_applied.ok()) << again_applied.error().to_string();
  const auto again = h.expect(MessageType::kVote);
  EXPECT_EQ(again.payload, first.payload);
  EXPECT_EQ(session.stats().votes_sent, 2u);
}

// The server died after the votes of round r arrived and before it decided r, and restarts from
// its checkpoint of round r: the state it sends first is of the node's own round, marked resumed.
// The vote went down with the old process, so the node sends the same signed frame again.
TEST(NodeSessionTest, AServerRestartedAtTheNodesOwnRoundGetsTheSameSignedVoteAgain) {
  SessionHarness h;
  Replica node_replica = Replica::create(h.setup).value();
  NodeSessionOptions options;
  options.idle_timeout = 10s;
  NodeSession session(h.setup, 0, *h.endpoints[1], node_replica, options);
  ASSERT_TRUE(session.start().ok());
  h.expect(MessageType::kControl);  // Join
  Checkpoint state;                 // the server's checkpoint of round 0
  state.round = 0;
  h.replica.save_to(state);
  h.start_round(0);
  auto event = session.next_round();
  ASSERT_TRUE(event.ok() && event->kind == NodeEvent::Kind::kCompute);
  NodeWorker worker(h.setup, 0);
  BitVector signs;
  ASSERT_TRUE(session.submit_vote(worker.vote(node_replica, 0, signs), signs).ok());
  const auto first = h.expect(MessageType::kVote);

  h.restart_server();
  Checkpoint resumed = state;
  resumed.sections[std::string(kResumedSection)] = {1};
  ASSERT_TRUE(h.server().send(node_id(0), MessageType::kStateTransfer, 0, encode_checkpoint(resumed)).ok());
  auto installed = session.poll();
  ASSERT_TRUE(installed.ok() && installed->kind == NodeEvent::Kind::kStateInstalled);
  EXPECT_FALSE(installed->moved);
  h.expect(MessageType::kControl);  // its Join
  h.start_round(0);
  const BitVector decided(h.replica.dimension(), true);
  ASSERT_TRUE(h.server()
                  .send(node_id(0), MessageType::kDecision, 0,
                        encode(Decision{0, h.replica.scale(0), h.replica.full_digest_after(0), decided}))
                  .ok());
  auto applied = session.await_decision();
  ASSERT_TRUE(applied.ok()) << applied.error().to_string();
  EXPECT_EQ(applied->kind, NodeEvent::Kind::kDecided);
  const auto again = h.expect(MessageType::kVote);
  EXPECT_EQ(again.payload, first.payload);
  EXPECT_EQ(session.stats().votes_sent, 2u);
}

// After the decision of the last round the run is over, whether or not the server's Finish arrives.
TEST(NodeSessionTest, TheLastDecisionEndsTheRunWithoutAFinish) {
  SessionHarness h;
  Replica node_replica = Replica::create(h.setup).value();
  NodeSession session(h.setup, 0, *h.endpoints[1], node_replica);
  ASSERT_TRUE(session.start().ok());
  h.expect(MessageType::kControl);  // Join
  const BitVector decided(h.replica.dimension(), true);
  NodeWorker worker(h.setup, 0);
  for (std::uint64_t round = 0; round < h.setup.options.rounds; ++round) {
    h.start_round(round);
    auto event = session.next_round();
    ASSERT_TRUE(event.ok() && event->kind == NodeEvent::Kind::kCompute) << round;
    BitVector signs;
    ASSERT_TRUE(session.submit_vote(worker.vote(node_replica, round, signs), signs).ok());
    EXPECT_EQ(session.stats().votes_sent, round + 1);
    ASSERT_TRUE(h.server()
                    .send(node_id(0), MessageType::kDecision, round,
                          encode(Decision{round, h.replica.scale(round), h.replica.full_digest_after(round), decided}))
                    .ok());
    h.replica.apply(round, decided);
    auto applied = session.await_decision();
    ASSERT_TRUE(applied.ok() && applied->kind == NodeEvent::Kind::kDecided) << round;
  }
  auto end = session.next_round();
  ASSERT_TRUE(end.ok()) << end.error().to_string();
  EXPECT_EQ(end->kind, NodeEvent::Kind::kFinished);
  EXPECT_EQ(session.round(), h.setup.options.rounds);
}

// The scale travels in the signed decision: a node applies the decision's η and λ, whatever its
// own schedule would say (a decision with an unusable scale does not decode: messages_test).
TEST(NodeSessionTest, TheNodeAppliesTheDecisionsScaleNotItsOwnSchedule) {
  SessionHarness h;
  Replica node_replica = Replica::create(h.setup).value();
  NodeSession session(h.setup, 0, *h.endpoints[1], node_replica);
  ASSERT_TRUE(session.start().ok());
  h.expect(MessageType::kControl);  // Join
  h.start_round(0);
  auto event = session.next_round();
  ASSERT_TRUE(event.ok() && event->kind == NodeEvent::Kind::kCompute);
  NodeWorker worker(h.setup, 0);
  BitVector signs;
  ASSERT_TRUE(session.submit_vote(worker.vote(node_replica, 0, signs), signs).ok());
  const BitVector decided(h.replica.dimension(), false);
  const learning::StepScale own = h.replica.scale(0);
  const learning::StepScale sent{own.lr * 3.0f, 0.01f};

  ASSERT_TRUE(h.server().send(node_id(0), MessageType::kDecision, 0, encode(Decision{0, sent, false, decided})).ok());
  auto applied = session.await_decision();
  ASSERT_TRUE(applied.ok() && applied->kind == NodeEvent::Kind::kDecided);
  EXPECT_EQ(session.round(), 1u);

  Replica expected = Replica::create(h.setup).value();
  expected.apply(0, decided, sent, false);
  EXPECT_EQ(node_replica.digest(), expected.digest());
  EXPECT_EQ(node_replica.state_digest(), expected.state_digest());
  Replica scheduled = Replica::create(h.setup).value();
  scheduled.apply(0, decided, own, false);
  EXPECT_NE(node_replica.digest(), scheduled.digest());
}

// Round starts queued while a node's link was down arrive in a burst: the node asks for the
// state once (a Join with its round and state digest), not once per start.
TEST(NodeSessionTest, ABurstOfStartsOnAnotherStateSendsOneJoin) {
  SessionHarness h;
  NodeSessionOptions options;
  options.join_retry = 5000ms;
  NodeSession session(h.setup, 0, *h.endpoints[1], h.replica, options);
  ASSERT_TRUE(session.start().ok());
  h.expect(MessageType::kControl);  // the first Join
  std::thread poller([&] {
    auto event = session.poll();
    EXPECT_TRUE(event.ok() && event->kind == NodeEvent::Kind::kFinished);
  });
  transport::Digest other = h.replica.state_digest();
  other[0] ^= 1;
  for (int k = 0; k < 4; ++k) {
    ASSERT_TRUE(h.server().send(node_id(0), MessageType::kRoundStart, 0, encode(RoundStart{0, 3000, other})).ok());
  }
  std::size_t joins = 0;
  for (auto message = h.server().receive(300ms); message.ok(); message = h.server().receive(300ms)) {
    if (message->type != MessageType::kControl) continue;
    auto control = decode_control(message->payload);
    ASSERT_TRUE(control.ok() && std::holds_alternative<Join>(*control));
    EXPECT_EQ(std::get<Join>(*control).round, 0u);
    EXPECT_EQ(std::get<Join>(*control).state_digest, h.replica.state_digest());
    ++joins;
  }
  EXPECT_EQ(joins, 1u);
  ASSERT_TRUE(h.server().send(node_id(0), MessageType::kControl, 0, encode(Finish{0})).ok());
  poller.join();
}

TEST(NodeSessionTest, TheGradientPathEncodesTheSubmittedGradient) {
  SessionHarness h("mean");
  NodeSession session(h.setup, 0, *h.endpoints[1], h.replica);
  ASSERT_TRUE(session.start().ok());
  h.start_round(0);
  auto event = session.next_round();
  ASSERT_TRUE(event.ok());
  ASSERT_EQ(event->work.kind, RoundWork::Kind::kGradient);
  std::vector<float> gradient(h.replica.dimension(), 0.25f);
  ASSERT_TRUE(session.submit_gradient(1.5, gradient).ok());
  auto vote = decode_encoded_vote(h.expect(MessageType::kVote).payload, 1 << 20);
  ASSERT_TRUE(vote.ok());
  EXPECT_EQ(vote->loss, 1.5);
  auto decoded = session.codec()->decode(vote->bytes, h.replica.model().layout());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, gradient);
}

TEST(NodeSessionTest, AGradientTheCallerEncodedGoesOutAsItsBytes) {
  SessionHarness h("mean", Placement::kReplicated, "mlp:hidden=4", "qsgd:s=4");
  NodeSession session(h.setup, 0, *h.endpoints[1], h.replica);
  ASSERT_TRUE(session.start().ok());
  h.start_round(0);
  ASSERT_EQ(session.next_round()->work.kind, RoundWork::Kind::kGradient);
  const auto& layout = h.replica.model().layout();
  std::vector<float> gradient(h.replica.dimension());
  for (std::size_t i = 0; i < gradient.size(); ++i) gradient[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
  // What a caller with its own copy of the codec writes from the round's stream: the session's bytes.
  auto copy = coding::make_codec(h.setup.options.codec).value();
  Rng rng = codec_rng(h.setup, 0, 0);
  auto bytes = copy->encode(gradient, layout, rng).bytes;
  Rng again = codec_rng(h.setup, 0, 0);
  ASSERT_EQ(session.codec()->encode(gradient, layout, again).bytes, bytes);

  // A size the codec cannot write is refused and the round stays open.
  auto cut = bytes;
  cut.pop_back();
  EXPECT_TRUE(session.round_open());
  EXPECT_EQ(session.submit_encoded(0.5, cut).error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(session.round_open());
  ASSERT_TRUE(session.submit_encoded(0.5, bytes).ok());
  EXPECT_FALSE(session.round_open());
  auto vote = decode_encoded_vote(h.expect(MessageType::kVote).payload, 1 << 20);
  ASSERT_TRUE(vote.ok());
  EXPECT_EQ(vote->round, 0u);
  EXPECT_EQ(vote->loss, 0.5);
  EXPECT_EQ(vote->model_digest, h.replica.state_digest());
  EXPECT_EQ(vote->bytes, bytes);
}

TEST(NodeSessionTest, ANodeWithAnAdversarySubmitsItsGradientNotBytes) {
  SessionHarness h("mean");
  NodeSessionOptions options;
  options.adversary = std::make_shared<NodeAdversary>();
  NodeSession session(h.setup, 0, *h.endpoints[1], h.replica, options);
  ASSERT_TRUE(session.start().ok());
  h.start_round(0);
  ASSERT_EQ(session.next_round()->work.kind, RoundWork::Kind::kGradient);
  const std::vector<float> gradient(h.replica.dimension(), 0.25f);
  Rng rng = codec_rng(h.setup, 0, 0);
  auto bytes = session.codec()->encode(gradient, h.replica.model().layout(), rng).bytes;
  EXPECT_EQ(session.submit_encoded(0.5, bytes).error().code, ErrorCode::kInvalidArgument);
  ASSERT_TRUE(session.submit_gradient(0.5, gradient).ok());  // the round was still open
  EXPECT_TRUE(decode_encoded_vote(h.expect(MessageType::kVote).payload, 1 << 20).ok());
}

// The one Byzantine seam: what the node sends instead of its honest message.
class InvertingAdversary : public NodeAdversary {
 public:
  void replace(MessageType type, Content content) override {
    if (type == MessageType::kVote && content.signs != nullptr) content.signs->flip();
  }
  Result<bool> deliver(MessageType type, std::uint64_t round, std::uint32_t deadline_ms,
                       const std::vector<std::uint8_t>& payload, transport::OutboundFrame honest,
                       const std::vector<transport::NodeId>& receivers, Link& link) override {
    ++delivered;
    if (withhold) return false;
    return NodeAdversary::deliver(type, round, deadline_ms, payload, std::move(honest), receivers, link);
  }
  int delivered = 0;
  bool withhold = false;
};

TEST(NodeSessionTest, TheAdversarySeamReplacesAndWithholdsTheVote) {
  SessionHarness h;
  auto adversary = std::make_shared<InvertingAdversary>();
  NodeSessionOptions options;
  options.adversary = adversary;
  NodeSession session(h.setup, 0, *h.endpoints[1], h.replica, options);
  ASSERT_TRUE(session.start().ok());
  h.start_round(0);
  ASSERT_EQ(session.next_round()->kind, NodeEvent::Kind::kCompute);
  BitVector honest(h.replica.dimension(), false);
  honest.set(1, true);
  ASSERT_TRUE(session.submit_vote(0.5, honest).ok());
  auto vote = decode_vote(h.expect(MessageType::kVote).payload, h.replica.dimension());
  ASSERT_TRUE(vote.ok());
  BitVector inverted = honest;
  inverted.flip();
  EXPECT_EQ(vote->signs, inverted);
  EXPECT_EQ(adversary->delivered, 1);

  // Next round the adversary withholds: nothing reaches the server.
  ASSERT_TRUE(h.server()
                  .send(node_id(0), MessageType::kDecision, 0,
                        encode(Decision{0, h.replica.scale(0), h.replica.full_digest_after(0),
                                        BitVector(h.replica.dimension(), true)}))
                  .ok());
  ASSERT_EQ(session.await_decision()->kind, NodeEvent::Kind::kDecided);
  h.replica.apply(0, BitVector(h.replica.dimension(), true));  // the server's replica, in step
  adversary->withhold = true;
  h.server().set_round(1);
  h.start_round(1);
  auto event = session.next_round();
  ASSERT_TRUE(event.ok());
  ASSERT_EQ(event->kind, NodeEvent::Kind::kCompute);
  ASSERT_TRUE(session.submit_vote(0.5, honest).ok());
  EXPECT_EQ(adversary->delivered, 2);
  for (auto message = h.server().receive(200ms); message.ok(); message = h.server().receive(200ms)) {
    EXPECT_NE(message->type, MessageType::kVote);
  }
}

TEST(NodeSessionTest, ExchangeVotesOverTheInputsOfItsRow) {
  SessionHarness h("vote", Placement::kExchange);
  const auto row = h.setup.code.row(0);
  ASSERT_GT(row.size(), 1u) << "the test needs peers in node 0's row";
  NodeSession session(h.setup, 0, *h.endpoints[1], h.replica);
  ASSERT_TRUE(session.start().ok());
  h.start_round(0);
  auto event = session.next_round();
  ASSERT_TRUE(event.ok());
  ASSERT_EQ(event->work.kind, RoundWork::Kind::kPartitionSigns);
  EXPECT_EQ(event->work.partitions, std::vector<std::uint32_t>{0});
  // The peers of its row send their partition signs (before or after its own: both are held). The
  // first peer's loss is NaN: left out of the vote's loss, as a Byzantine metric.
  bool first_peer = true;
  for (auto source : row) {
    if (source == 0) continue;
    const double loss = std::exchange(first_peer, false) ? std::numeric_limits<double>::quiet_NaN() : 0.25;
    Vote signs{0, loss, h.replica.state_digest(), BitVector(h.replica.dimension(), true)};
    ASSERT_TRUE(h.endpoints[source + 1]->send(node_id(0), MessageType::kPartitionSigns, 0, encode(signs)).ok());
  }
  ASSERT_TRUE(session.submit_partition_signs(0.5, BitVector(h.replica.dimension(), true)).ok());
  // The vote goes out once every input arrived, while the session handles messages.
  Result<NodeEvent> decided = make_error(ErrorCode::kInternal, "not run");
  std::thread node([&] { decided = session.await_decision(); });
  auto vote = decode_audited_vote(h.expect(MessageType::kVote).payload, h.replica.dimension(), 3);
  ASSERT_TRUE(vote.ok()) << vote.error().to_string();
  EXPECT_EQ(vote->inputs.size(), row.size());  // its own input and each peer's, with their envelopes
  EXPECT_EQ(vote->vote.signs, BitVector(h.replica.dimension(), true));
  EXPECT_DOUBLE_EQ(vote->vote.loss,
                   (0.5 + 0.25 * static_cast<double>(row.size() - 2)) / static_cast<double>(row.size() - 1));
  ASSERT_TRUE(h.server()
                  .send(node_id(0), MessageType::kDecision, 0,
                        encode(Decision{0, h.replica.scale(0), h.replica.full_digest_after(0),
                                        BitVector(h.replica.dimension(), true)}))
                  .ok());
  node.join();
  ASSERT_TRUE(decided.ok());
  EXPECT_EQ(decided->kind, NodeEvent::Kind::kDecided);
  EXPECT_EQ(session.stats().inputs_missing, 0u);
}

TEST(NodeSessionTest, ASubmissionForAnotherKindOfRoundIsAnError) {
  SessionHarness h;
  NodeSession session(h.setup, 0, *h.endpoints[1], h.replica);
  ASSERT_TRUE(session.start().ok());
  h.start_round(0);
  ASSERT_EQ(session.next_round()->kind, NodeEvent::Kind::kCompute);
  EXPECT_EQ(session.submit_gradient(0, std::vector<float>(h.replica.dimension())).error().code,
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace ballot::runtime
