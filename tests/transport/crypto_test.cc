#include "transport/crypto.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace ballot::transport {
namespace {

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<std::uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

ByteSpan bytes_of(const std::string& text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(to_hex(sha256(bytes_of(""))), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256(bytes_of("abc"))), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Ed25519, Rfc8032TestVector1) {
  // RFC 8032 section 7.1, TEST 1 (empty message).
  const auto seed = from_hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
  auto key = SigningKey::from_seed(seed);
  ASSERT_TRUE(key.ok()) << key.error().to_string();
  EXPECT_EQ(to_hex(key->verify_key().bytes()), "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
  const Signature signature = key->sign({});
  EXPECT_EQ(to_hex(signature),
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b");
  EXPECT_TRUE(key->verify_key().verify({}, signature));
}

TEST(Ed25519, SignVerifyAndRejectTampering) {
  auto key = SigningKey::generate();
  ASSERT_TRUE(key.ok());
  auto other = SigningKey::generate();
  ASSERT_TRUE(other.ok());
  const std::string message = "round 7 vote";
  Signature signature = key->sign(bytes_of(message));
  EXPECT_TRUE(key->verify_key().verify(bytes_of(message), signature));
  EXPECT_FALSE(other->verify_key().verify(bytes_of(message), signature));
  EXPECT_FALSE(key->verify_key().verify(bytes_of("round 8 vote"), signature));
  EXPECT_FALSE(key->verify_key().verify(bytes_of(message), ByteSpan(signature).first(63)));
  signature[10] ^= 1;
  EXPECT_FALSE(key->verify_key().verify(bytes_of(message), signature));
  EXPECT_FALSE(VerifyKey().verify(bytes_of(message), signature));
}

TEST(Ed25519, RejectsBadKeyAndSeedLengths) {
  EXPECT_EQ(VerifyKey::from_bytes(std::vector<std::uint8_t>(31)).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(SigningKey::from_seed(std::vector<std::uint8_t>(33)).error().code, ErrorCode::kInvalidArgument);
}

// The conformance suite of the signature layer: every Wycheproof EdDSA vector must get the
// expected verdict, so that all Ballot verifiers agree on every edge case (DESIGN.md).
TEST(Ed25519, WycheproofAllVectors) {
  const std::string path = BALLOT_SHARED_DIR "/testdata/wycheproof/ed25519_test.json";
  std::ifstream in(path);
  if (!in) GTEST_SKIP() << "Wycheproof vectors not found at " << path << " (CI provides ../shared)";
  const nlohmann::json suite = nlohmann::json::parse(in);
  int checked = 0, valid = 0;
  for (const auto& group : suite.at("testGroups")) {
    const auto public_key = from_hex(group.at("publicKey").at("pk").get<std::string>());
    auto key = VerifyKey::from_bytes(public_key);
    for (const auto& test : group.at("tests")) {
      const auto message = from_hex(test.at("msg").get<std::string>());
      const auto signature = from_hex(test.at("sig").get<std::string>());
      const std::string expected = test.at("result").get<std::string>();
      ASSERT_NE(expected, "acceptable") << "tcId " << test.at("tcId");  // none in this suite
      const bool verified = key.ok() && key->verify(message, signature);
      EXPECT_EQ(verified, expected == "valid")
          << "tcId " << test.at("tcId") << " (" << test.at("comment").get<std::string>() << ")";
      ++checked;
      valid += expected == "valid";
    }
  }
  EXPECT_EQ(checked, suite.at("numberOfTests").get<int>());
  EXPECT_EQ(checked, 151);
  EXPECT_GT(valid, 0);
}

}  // namespace
}  // namespace ballot::transport
