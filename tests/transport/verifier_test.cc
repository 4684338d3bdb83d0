#include "transport/verifier.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace ballot::transport {
namespace {

constexpr std::uint64_t kJob = 77;

class VerifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_key_ = SigningKey::generate().value();
    node_key_ = SigningKey::generate().value();
    other_key_ = SigningKey::generate().value();
    Registry registry;
    ASSERT_TRUE(registry.add(0, Role::kServer, server_key_.verify_key()).ok());
    ASSERT_TRUE(registry.add(1, Role::kNode, node_key_.verify_key()).ok());
    ASSERT_TRUE(registry.add(2, Role::kNode, other_key_.verify_key()).ok());
    VerifierOptions options;
    options.job = kJob;
    verifier_ = std::make_unique<Verifier>(std::move(registry), options);
    node_ = std::make_unique<Signer>(node_key_, kJob, 1, Role::kNode);
  }

  Verdict check(const SignedEnvelope& envelope, const std::vector<std::uint8_t>& payload,
                std::optional<NodeId> peer = 1) {
    return verifier_->verify(envelope, payload, peer);
  }

  SigningKey server_key_, node_key_, other_key_;
  std::unique_ptr<Verifier> verifier_;
  std::unique_ptr<Signer> node_;
  std::vector<std::uint8_t> payload_{1, 2, 3, 4};
};

TEST_F(VerifierTest, AcceptsAuthenticFresh) {
  EXPECT_TRUE(check(node_->envelope_for(MessageType::kVote, 0, payload_), payload_).ok());
  EXPECT_TRUE(check(node_->envelope_for(MessageType::kControl, 0, payload_), payload_).ok());
  EXPECT_TRUE(check(node_->envelope_for(MessageType::kControl, 1, payload_), payload_).ok());  // one ahead
}

TEST_F(VerifierTest, ForgedSignature) {
  auto envelope = node_->envelope_for(MessageType::kVote, 0, payload_);
  envelope.signature[5] ^= 0x20;
  const Verdict verdict = check(envelope, payload_);
  EXPECT_EQ(verdict.kind, Misbehaviour::kBadSignature);
  EXPECT_EQ(verdict.status.error().code, ErrorCode::kAuthentication);
  EXPECT_EQ(verdict.status.error().peer, 1u);
  // Signed with another registered node's key but claiming node 1.
  Signer impostor(other_key_, kJob, 1, Role::kNode);
  EXPECT_EQ(check(impostor.envelope_for(MessageType::kVote, 0, payload_), payload_).kind, Misbehaviour::kBadSignature);
}

TEST_F(VerifierTest, TamperedPayload) {
  const auto envelope = node_->envelope_for(MessageType::kVote, 0, payload_);
  auto tampered = payload_;
  tampered[0] ^= 1;
  EXPECT_EQ(check(envelope, tampered).kind, Misbehaviour::kBadSignature);
  tampered.push_back(0);
  EXPECT_EQ(check(envelope, tampered).kind, Misbehaviour::kMalformedFrame);
}

TEST_F(VerifierTest, ReplayedSequence) {
  const auto envelope = node_->envelope_for(MessageType::kControl, 0, payload_);
  EXPECT_TRUE(check(envelope, payload_).ok());
  const Verdict replay = check(envelope, payload_);
  EXPECT_EQ(replay.kind, Misbehaviour::kReplay);
  EXPECT_EQ(replay.status.error().code, ErrorCode::kReplay);
}

TEST_F(VerifierTest, ReorderingWithinTheWindow) {
  std::vector<SignedEnvelope> envelopes;
  for (int i = 0; i < 70; ++i) envelopes.push_back(node_->envelope_for(MessageType::kControl, 0, payload_));
  EXPECT_TRUE(check(envelopes[69], payload_).ok());
  EXPECT_TRUE(check(envelopes[10], payload_).ok());  // 59 behind: inside the window
  EXPECT_EQ(check(envelopes[10], payload_).kind, Misbehaviour::kReplay);
  EXPECT_EQ(check(envelopes[5], payload_).kind, Misbehaviour::kReplay);  // 64 behind: too old
  EXPECT_TRUE(check(envelopes[68], payload_).ok());
}

TEST_F(VerifierTest, Rounds) {
  verifier_->set_round(5);
  EXPECT_EQ(check(node_->envelope_for(MessageType::kVote, 4, payload_), payload_).kind, Misbehaviour::kStaleRound);
  EXPECT_EQ(check(node_->envelope_for(MessageType::kVote, 7, payload_), payload_).kind, Misbehaviour::kFutureRound);
  EXPECT_TRUE(check(node_->envelope_for(MessageType::kVote, 5, payload_), payload_).ok());
  EXPECT_TRUE(check(node_->envelope_for(MessageType::kVote, 6, payload_), payload_).ok());
  verifier_->set_round(3);  // never backwards
  EXPECT_EQ(verifier_->round(), 5u);
  // An envelope captured in round 6 and replayed after the round moved on is stale.
  const auto captured = node_->envelope_for(MessageType::kVote, 6, payload_);
  EXPECT_TRUE(check(captured, payload_).ok());
  verifier_->set_round(7);
  EXPECT_EQ(check(captured, payload_).kind, Misbehaviour::kStaleRound);
}

// Control, checkpoint and hello messages are not bound to a round (a restarted peer does not know
// the round), but a replay is still caught by the sender's sequence window.
TEST_F(VerifierTest, RoundFreeTypesIgnoreTheWindowButNotReplays) {
  verifier_->set_round(50);
  const auto join = node_->envelope_for(MessageType::kControl, 0, payload_);
  EXPECT_TRUE(check(join, payload_).ok());
  EXPECT_EQ(check(join, payload_).kind, Misbehaviour::kReplay);
  EXPECT_TRUE(check(node_->envelope_for(MessageType::kControl, 90, payload_), payload_).ok());
  verifier_->set_round(60);
  EXPECT_EQ(check(join, payload_).kind, Misbehaviour::kReplay);
}

// After a state transfer from the server the window may move back (a resumed server).
TEST_F(VerifierTest, ResetRoundMovesBackAndForgetsRoundState) {
  verifier_->set_round(10);
  const auto vote = node_->envelope_for(MessageType::kVote, 10, payload_);
  EXPECT_TRUE(check(vote, payload_).ok());
  const auto control = node_->envelope_for(MessageType::kControl, 10, payload_);
  EXPECT_TRUE(check(control, payload_).ok());
  verifier_->reset_round(4);
  EXPECT_EQ(verifier_->round(), 4u);
  EXPECT_TRUE(check(node_->envelope_for(MessageType::kVote, 4, payload_), payload_).ok());
  EXPECT_EQ(check(vote, payload_).kind, Misbehaviour::kFutureRound);
  EXPECT_EQ(check(control, payload_).kind, Misbehaviour::kReplay);  // round-free state is kept
}

TEST_F(VerifierTest, IdentityRegistryJobRole) {
  // Node 1's envelope arriving on node 2's authenticated session.
  EXPECT_EQ(check(node_->envelope_for(MessageType::kVote, 0, payload_), payload_, 2).kind,
            Misbehaviour::kIdentityMismatch);
  Signer stranger(SigningKey::generate().value(), kJob, 9, Role::kNode);
  EXPECT_EQ(check(stranger.envelope_for(MessageType::kVote, 0, payload_), payload_, std::nullopt).kind,
            Misbehaviour::kUnknownSender);
  Signer wrong_role(node_key_, kJob, 1, Role::kServer);
  EXPECT_EQ(check(wrong_role.envelope_for(MessageType::kControl, 0, payload_), payload_).kind,
            Misbehaviour::kUnknownSender);
  Signer other_job(node_key_, kJob + 1, 1, Role::kNode);
  EXPECT_EQ(check(other_job.envelope_for(MessageType::kVote, 0, payload_), payload_).kind, Misbehaviour::kWrongJob);
  // Nodes may not announce results; the server may.
  EXPECT_EQ(check(node_->envelope_for(MessageType::kDecision, 0, payload_), payload_).kind,
            Misbehaviour::kNotPermitted);
  Signer server(server_key_, kJob, 0, Role::kServer);
  EXPECT_TRUE(check(server.envelope_for(MessageType::kDecision, 0, payload_), payload_, 0).ok());
  EXPECT_EQ(check(server.envelope_for(MessageType::kVote, 0, payload_), payload_, 0).kind, Misbehaviour::kNotPermitted);
}

TEST_F(VerifierTest, EquivocationYieldsProof) {
  const std::vector<std::uint8_t> other{9, 9, 9};
  EXPECT_TRUE(check(node_->envelope_for(MessageType::kPartitionSigns, 0, payload_), payload_).ok());
  // The same payload again (a retransmission with a new sequence) is not equivocation.
  EXPECT_TRUE(check(node_->envelope_for(MessageType::kPartitionSigns, 0, payload_), payload_).ok());
  const Verdict verdict = check(node_->envelope_for(MessageType::kPartitionSigns, 0, other), other);
  ASSERT_EQ(verdict.kind, Misbehaviour::kEquivocation);
  ASSERT_TRUE(verdict.proof.has_value());
  EXPECT_TRUE(check_equivocation_proof(*verdict.proof, verifier_->registry()).ok());
  // Anyone can check the encoded proof with the registry alone.
  auto decoded = EquivocationProof::decode(verdict.proof->encode());
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(check_equivocation_proof(*decoded, verifier_->registry()).ok());
  // Control messages may differ within a round.
  EXPECT_TRUE(check(node_->envelope_for(MessageType::kControl, 0, payload_), payload_).ok());
  EXPECT_TRUE(check(node_->envelope_for(MessageType::kControl, 0, other), other).ok());
  // A new round starts clean.
  verifier_->set_round(1);
  EXPECT_TRUE(check(node_->envelope_for(MessageType::kPartitionSigns, 1, other), other).ok());
}

TEST_F(VerifierTest, RejectedFramesLeaveNoState) {
  // A forged frame must not consume the sequence number of the authentic one.
  auto authentic = node_->envelope_for(MessageType::kVote, 0, payload_);
  auto forged = authentic;
  forged.signature[0] ^= 1;
  EXPECT_EQ(check(forged, payload_).kind, Misbehaviour::kBadSignature);
  EXPECT_TRUE(check(authentic, payload_).ok());
}

TEST(RoleMaySend, Table) {
  EXPECT_TRUE(role_may_send(Role::kServer, MessageType::kRoundStart));
  EXPECT_FALSE(role_may_send(Role::kNode, MessageType::kRoundStart));
  EXPECT_TRUE(role_may_send(Role::kNode, MessageType::kPartitionSigns));
  EXPECT_FALSE(role_may_send(Role::kServer, MessageType::kPartitionSigns));
  EXPECT_TRUE(role_may_send(Role::kNode, MessageType::kHello));
  EXPECT_TRUE(role_may_send(Role::kNode, MessageType::kDecisionPiece));
  EXPECT_TRUE(role_may_send(Role::kServer, MessageType::kDecisionPiece));
  // Only the server transfers state: a node's would be up to 1 GiB for a receiver to buffer.
  EXPECT_TRUE(role_may_send(Role::kServer, MessageType::kStateTransfer));
  EXPECT_FALSE(role_may_send(Role::kNode, MessageType::kStateTransfer));
  EXPECT_EQ(misbehaviour_name(Misbehaviour::kEquivocation), "equivocation");
}

}  // namespace
}  // namespace ballot::transport
