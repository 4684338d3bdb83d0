#include "transport/identity.h"

#include <gtest/gtest.h>

#include "transport/misbehaviour.h"

namespace ballot::transport {
namespace {

TEST(Registry, AddFindDuplicate) {
  Registry registry;
  const auto key = SigningKey::generate().value().verify_key();
  ASSERT_TRUE(registry.add(3, Role::kNode, key).ok());
  EXPECT_EQ(registry.add(3, Role::kServer, key).error().code, ErrorCode::kInvalidArgument);
  ASSERT_NE(registry.find(3), nullptr);
  EXPECT_EQ(registry.find(3)->key, key);
  EXPECT_EQ(registry.find(4), nullptr);
  EXPECT_EQ(registry.size(), 1u);
}

TEST(Role, NamesAndValues) {
  EXPECT_EQ(role_name(Role::kServer), "server");
  EXPECT_EQ(role_name(Role::kNode), "node");
  EXPECT_TRUE(is_valid_role(1));
  EXPECT_TRUE(is_valid_role(2));
  EXPECT_FALSE(is_valid_role(0));
  EXPECT_FALSE(is_valid_role(3));
}

TEST(Misbehaviour, EveryKindHasAName) {
  for (std::size_t k = 0; k < kMisbehaviourCount; ++k)
    EXPECT_NE(misbehaviour_name(static_cast<Misbehaviour>(k)), "unknown") << k;
}

}  // namespace
}  // namespace ballot::transport
