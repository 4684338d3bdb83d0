#include "transport/misbehaviour.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace ballot::transport {
namespace {

// Reports, metrics and quarantine logs key on these names: each kind has its own.
TEST(Misbehaviour, EveryKindHasADistinctName) {
  std::set<std::string> names;
  for (std::size_t k = 0; k < kMisbehaviourCount; ++k) {
    const auto name = misbehaviour_name(static_cast<Misbehaviour>(k));
    EXPECT_FALSE(name.empty());
    names.emplace(name);
  }
  EXPECT_EQ(names.size(), kMisbehaviourCount);
  EXPECT_EQ(misbehaviour_name(Misbehaviour::kEquivocation), "equivocation");
}

// Observers override what they need; the default equivocation hook does nothing.
TEST(Misbehaviour, ObserverDefaultsAreHarmless) {
  struct Counting : MisbehaviourObserver {
    int events = 0;
    void on_misbehaviour(const MisbehaviourReport&) override { ++events; }
  } observer;
  observer.on_misbehaviour(MisbehaviourReport{3, Misbehaviour::kReplay, make_error(ErrorCode::kReplay, "x")});
  observer.on_equivocation(EquivocationProof{});
  EXPECT_EQ(observer.events, 1);
}

}  // namespace
}  // namespace ballot::transport
