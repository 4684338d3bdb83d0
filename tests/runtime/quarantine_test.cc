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

TEST(Quarantine, UnauthenticatedEventsBlameNobody) {
  Quarantine quarantine(QuarantineOptions{1});
  quarantine.on_misbehaviour(event(std::nullopt, transport::Misbehaviour::kHandshakeFailed));
  EXPECT_TRUE(quarantine.quarantined().empty());
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
}

}  // namespace
}  // namespace ballot::runtime
