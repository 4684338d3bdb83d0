#include "runtime/quarantine.h"

#include <gtest/gtest.h>

namespace ballot::runtime {
namespace {

transport::MisbehaviourReport event(std::optional<transport::NodeId> peer, transport::Misbehaviour kind) {
  return {peer, kind, make_error(ErrorCode::kAuthentication, "test")};
}

TEST(Quarantine, ThresholdOfEvents) {
  Quarantine quarantine(QuarantineOptions{3});
  quarantine.on_misbehaviour(event(4, transport::Misbehaviour::kBadSignature));
  quarantine.report(4);
  EXPECT_FALSE(quarantine.is_quarantined(4));
  quarantine.on_misbehaviour(event(4, transport::Misbehaviour::kReplay));
  EXPECT_TRUE(quarantine.is_quarantined(4));
  EXPECT_EQ(quarantine.events(4), 3u);
  EXPECT_EQ(quarantine.quarantined(), std::vector<transport::NodeId>{4});
  EXPECT_FALSE(quarantine.is_quarantined(5));
}

TEST(Quarantine, UnauthenticatedEventsBlameNobodyAndAreCounted) {
  Quarantine quarantine(QuarantineOptions{1});
  EXPECT_EQ(quarantine.unauthenticated(), 0u);
  quarantine.on_misbehaviour(event(std::nullopt, transport::Misbehaviour::kHandshakeFailed));
  // Evidence kinds too: a certificate of id 2 whose key is not the pinned one names no node.
  quarantine.on_misbehaviour(event(std::nullopt, transport::Misbehaviour::kIdentityMismatch));
  quarantine.on_misbehaviour(event(std::nullopt, transport::Misbehaviour::kUnknownSender));
  EXPECT_TRUE(quarantine.quarantined().empty());
  EXPECT_EQ(quarantine.unauthenticated(), 3u);
  for (transport::NodeId node = 0; node < 8; ++node) EXPECT_EQ(quarantine.events(node), 0u);
  quarantine.on_misbehaviour(event(2, transport::Misbehaviour::kIdentityMismatch));
  EXPECT_EQ(quarantine.unauthenticated(), 3u);
  EXPECT_TRUE(quarantine.is_quarantined(2));
}

TEST(Quarantine, EquivocationProofQuarantinesAtOnce) {
  Quarantine quarantine;
  transport::EquivocationProof proof;
  proof.first.header.sender = 2;
  proof.second.header.sender = 2;
  quarantine.on_misbehaviour(event(2, transport::Misbehaviour::kEquivocation));  // counted via the proof only
  EXPECT_FALSE(quarantine.is_quarantined(2));
  quarantine.on_equivocation(proof);
  EXPECT_TRUE(quarantine.is_quarantined(2));
  EXPECT_EQ(quarantine.proofs().size(), 1u);
  // One proof per author is kept (and forwarded): an author that keeps signing conflicting
  // frames does not grow the list.
  const auto events = quarantine.events(2);
  for (int i = 0; i < 1000; ++i) quarantine.on_equivocation(proof);
  EXPECT_EQ(quarantine.proof_count(), 1u);
  EXPECT_EQ(quarantine.events(2), events);
  proof.first.header.sender = proof.second.header.sender = 3;
  quarantine.on_equivocation(proof);
  EXPECT_EQ(quarantine.proof_count(), 2u);
  EXPECT_TRUE(quarantine.is_quarantined(3));
}

// Lateness is not evidence: a paused or restarting honest node sends stale rounds, late votes and
// votes on another model, and lets deadlines pass inside frames. Counted, never quarantined.
TEST(Quarantine, LatenessIsCountedButNeverQuarantines) {
  Quarantine quarantine(QuarantineOptions{3});
  for (int i = 0; i < 20; ++i) {
    quarantine.on_misbehaviour(event(2, transport::Misbehaviour::kStaleRound));
    quarantine.on_misbehaviour(event(2, transport::Misbehaviour::kFutureRound));
    quarantine.on_misbehaviour(event(2, transport::Misbehaviour::kTimeout));
    quarantine.on_misbehaviour(event(2, transport::Misbehaviour::kTruncated));
    quarantine.report_late(2);
  }
  EXPECT_FALSE(quarantine.is_quarantined(2));
  EXPECT_EQ(quarantine.events(2), 0u);
  EXPECT_EQ(quarantine.late(2), 100u);
  // Evidence still counts for the same node.
  for (int i = 0; i < 3; ++i) quarantine.on_misbehaviour(event(2, transport::Misbehaviour::kBadSignature));
  EXPECT_TRUE(quarantine.is_quarantined(2));
}

// A second session for a live id is a security event with no blame: either process may be the
// honest one.
TEST(Quarantine, DuplicateSessionsAreCountedWithoutBlame) {
  Quarantine quarantine(QuarantineOptions{1});
  for (int i = 0; i < 5; ++i) quarantine.on_misbehaviour(event(3, transport::Misbehaviour::kDuplicateSession));
  EXPECT_FALSE(quarantine.is_quarantined(3));
  EXPECT_EQ(quarantine.events(3), 0u);
  EXPECT_EQ(quarantine.duplicate_sessions(3), 5u);
}

TEST(Quarantine, EveryKindHasAWeight) {
  using transport::Misbehaviour;
  EXPECT_EQ(weight_of(Misbehaviour::kBadSignature), Weight::kEvidence);
  EXPECT_EQ(weight_of(Misbehaviour::kMalformedFrame), Weight::kEvidence);
  EXPECT_EQ(weight_of(Misbehaviour::kReplay), Weight::kEvidence);
  EXPECT_EQ(weight_of(Misbehaviour::kStaleRound), Weight::kLateness);
  EXPECT_EQ(weight_of(Misbehaviour::kTimeout), Weight::kLateness);
  EXPECT_EQ(weight_of(Misbehaviour::kDuplicateSession), Weight::kNoBlame);
}

}  // namespace
}  // namespace ballot::runtime
