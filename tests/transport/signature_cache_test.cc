#include "transport/signature_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ballot::transport {
namespace {

ByteSpan bytes_of(const std::string& text) {
  return ByteSpan(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}

TEST(SignatureCache, AnswersLikeVerifyAndRemembersOnlySuccesses) {
  auto key = SigningKey::generate().value();
  auto other = SigningKey::generate().value();
  const std::string message = "round 7: decision";
  const auto signature = key.sign(bytes_of(message));
  SignatureCache cache;
  EXPECT_TRUE(cache.verify(key.verify_key(), bytes_of(message), signature));
  EXPECT_EQ(cache.hits(), 0u);
  EXPECT_TRUE(cache.verify(key.verify_key(), bytes_of(message), signature));
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.size(), 1u);

  // Whatever differs from the verified triple is verified afresh, and fails.
  auto forged = signature;
  forged[5] ^= 0x01;
  EXPECT_FALSE(cache.verify(key.verify_key(), bytes_of(message), forged));
  EXPECT_FALSE(cache.verify(other.verify_key(), bytes_of(message), signature));
  EXPECT_FALSE(cache.verify(key.verify_key(), bytes_of("round 7: decisioN"), signature));
  EXPECT_FALSE(cache.verify(key.verify_key(), bytes_of(message), ByteSpan(signature.data(), 63)));
  EXPECT_FALSE(cache.verify(VerifyKey{}, bytes_of(message), signature));
  EXPECT_EQ(cache.size(), 1u);  // failures are not remembered
  EXPECT_EQ(cache.hits(), 1u);
}

TEST(SignatureCache, ForgetsTheOldestBeyondItsCapacity) {
  auto key = SigningKey::generate().value();
  SignatureCache cache(2);
  std::vector<std::string> messages = {"a", "b", "c"};
  for (const auto& message : messages)
    EXPECT_TRUE(cache.verify(key.verify_key(), bytes_of(message), key.sign(bytes_of(message))));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_TRUE(cache.verify(key.verify_key(), bytes_of("c"), key.sign(bytes_of("c"))));
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_TRUE(cache.verify(key.verify_key(), bytes_of("a"), key.sign(bytes_of("a"))));  // verified again
  EXPECT_EQ(cache.hits(), 1u);
}

}  // namespace
}  // namespace ballot::transport
