#include "transport/crypto.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "transport/detail/sha256_lanes.h"

namespace ballot::transport {
namespace {

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<std::uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

ByteSpan bytes_of(const std::string& text) { return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()}; }

TEST(Sha256, KnownAnswers) {
  EXPECT_EQ(to_hex(sha256(bytes_of(""))), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256(bytes_of("abc"))), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> bytes(n);
  std::uint32_t x = seed * 2654435761u + 12345;
  for (auto& b : bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return bytes;
}

// Every lane of the 16-lane kernel against OpenSSL, over lengths around the padding boundaries
// (55/56 bytes: one or two tail blocks) and every group size, each lane with its own data.
TEST(Sha256Lanes, EveryLaneMatchesOpenSsl) {
  kernels::ScopedIsaLimit uncapped(kernels::Isa::kAvx512);  // whatever BALLOT_ISA says
  if (!detail::sha256_x16_available()) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (const std::size_t length : {0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 1000, 16383, 16384, 16385}) {
    std::vector<std::vector<std::uint8_t>> data;
    std::vector<const std::uint8_t*> pointers;
    for (std::uint32_t l = 0; l < detail::kSha256Lanes; ++l) data.push_back(pattern(length + 1, l + 100 * length));
    for (auto& d : data) pointers.push_back(d.data());
    for (std::size_t count = 1; count <= detail::kSha256Lanes; ++count) {
      std::vector<Digest> out(count);
      detail::sha256_x16(pointers.data(), count, length, out.data());
      for (std::size_t l = 0; l < count; ++l)
        ASSERT_EQ(to_hex(out[l]), to_hex(sha256(ByteSpan(data[l].data(), length))))
            << "length " << length << ", lane " << l << " of " << count;
    }
  }
}

TEST(Sha256Lanes, AnyCountMatchesOpenSsl) {
  const std::size_t length = 4096 + 17;
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<const std::uint8_t*> pointers;
  for (std::uint32_t i = 0; i < 40; ++i) data.push_back(pattern(length, 7 + i));
  for (auto& d : data) pointers.push_back(d.data());
  for (const std::size_t count : {0, 1, 7, 8, 15, 16, 17, 23, 24, 33, 40}) {
    std::vector<Digest> out(count);
    detail::sha256_equal_length(pointers.data(), count, length, out.data());
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(out[i], sha256(data[i])) << "count " << count << ", message " << i;
  }
}

// The one ISA switch (kernels/isa.h) also picks the 16-lane kernel: every level this CPU runs gives
// the digests of the scalar level (OpenSSL one leaf at a time), one-shot and incremental.
TEST(PayloadDigest, SameAtEveryIsaLevel) {
  const std::size_t L = kPayloadLeafSize;
  std::vector<std::vector<std::uint8_t>> payloads;
  for (const std::size_t n : {std::size_t{0}, L + 1, 16 * L, 40 * L + 5, 85 * L + 7000}) {
    payloads.push_back(pattern(n, static_cast<std::uint32_t>(n) + 5));
  }
  auto digests = [&] {
    std::vector<Digest> out;
    for (const auto& payload : payloads) {
      out.push_back(payload_digest(payload));
      PayloadDigester digester(payload.size());
      for (std::size_t have = 0; have < payload.size();) {
        have = std::min(payload.size(), have + 100000);
        digester.update(ByteSpan(payload).first(have));
      }
      out.push_back(digester.finish(payload));
    }
    return out;
  };
  std::vector<Digest> scalar;
  {
    kernels::ScopedIsaLimit cap(kernels::Isa::kScalar);
    EXPECT_FALSE(detail::sha256_x16_available());
    scalar = digests();
  }
  for (const auto isa : kernels::supported_isas()) {
    kernels::ScopedIsaLimit cap(isa);
    EXPECT_EQ(detail::sha256_x16_available(), isa == kernels::Isa::kAvx512);
    EXPECT_EQ(digests(), scalar) << kernels::isa_name(isa);
  }
}

// The tree, written out from its definition with OpenSSL's SHA-256 (docs/protocol.md).
Digest tree_by_definition(ByteSpan payload) {
  std::vector<std::uint8_t> input;
  for (std::size_t at = 0; at < payload.size(); at += kPayloadLeafSize) {
    const Digest leaf = sha256(payload.subspan(at, std::min(kPayloadLeafSize, payload.size() - at)));
    input.insert(input.end(), leaf.begin(), leaf.end());
  }
  for (int i = 0; i < 8; ++i)
    input.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(payload.size()) >> (8 * i)));
  return sha256(input);
}

TEST(PayloadDigest, KnownAnswers) {
  // Independent values (Python hashlib, the definition in docs/protocol.md).
  EXPECT_EQ(to_hex(payload_digest({})), "af5570f5a1810b7af78caf4bc70a660f0df51e42baf91d4de5b2328de0e83dfc");
  EXPECT_EQ(to_hex(payload_digest(bytes_of("abc"))),
            "39e6ecbb90eec724b8db13f608fbf85c4ead558d6dfbbf2942ab4d6a6d536457");
  std::vector<std::uint8_t> ramp(100000);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<std::uint8_t>(i * 31 + 7);
  EXPECT_EQ(to_hex(payload_digest(ramp)), "2cac9bd2fbe04b4c6b1d576c614289cdd9d658854e646062d2650f6aca65fa96");
}

TEST(PayloadDigest, MatchesDefinitionAtLeafBoundaries) {
  const std::size_t L = kPayloadLeafSize;
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, L - 1, L, L + 1, 7 * L, 8 * L + 3, 16 * L, 16 * L + 1,
                              33 * L - 1, 85 * L + 7000}) {
    const auto payload = pattern(n, static_cast<std::uint32_t>(n));
    EXPECT_EQ(payload_digest(payload), tree_by_definition(payload)) << "n = " << n;
  }
}

TEST(PayloadDigest, DiffersFromPlainSha256AndSeesEveryByte) {
  auto payload = pattern(40 * kPayloadLeafSize + 5, 3);
  const Digest root = payload_digest(payload);
  EXPECT_NE(root, sha256(payload));
  for (const std::size_t at : {std::size_t{0}, kPayloadLeafSize - 1, 20 * kPayloadLeafSize, payload.size() - 1}) {
    payload[at] ^= 0x10;
    EXPECT_NE(payload_digest(payload), root) << "byte " << at;
    payload[at] ^= 0x10;
  }
  // One byte less: a different length, so a different root even if the leaves agreed.
  EXPECT_NE(payload_digest(ByteSpan(payload).first(payload.size() - 1)), root);
}

// The receive path: prefixes of growing size, in a buffer that moves between calls.
TEST(PayloadDigester, IncrementalEqualsOneShot) {
  const auto payload = pattern(85 * kPayloadLeafSize + 12345, 11);
  const Digest expected = payload_digest(payload);
  for (const std::size_t step : {std::size_t{1000}, std::size_t{16384}, std::size_t{100000}, std::size_t{262144}}) {
    PayloadDigester digester(payload.size());
    std::vector<std::uint8_t> buffer;
    for (std::size_t have = 0; have < payload.size();) {
      have = std::min(payload.size(), have + step);
      buffer.assign(payload.begin(),
                    payload.begin() + static_cast<std::ptrdiff_t>(have));  // a fresh allocation each time
      digester.update(ByteSpan(buffer));
    }
    EXPECT_EQ(digester.finish(payload), expected) << "step " << step;
    digester.reset(3);
    EXPECT_EQ(digester.finish(bytes_of("abc")), payload_digest(bytes_of("abc")));
  }
}

TEST(Ed25519, Rfc8032TestVector1) {
  // RFC 8032 section 7.1, TEST 1 (empty message).
  const auto seed = from_hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
  auto key = SigningKey::from_seed(seed);
  ASSERT_TRUE(key.ok()) << key.error().to_string();
  EXPECT_EQ(to_hex(key->verify_key().bytes()), "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
  const Signature signature = key->sign({});
  EXPECT_EQ(to_hex(signature),
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f059"
            "5bbe24655141438e7a100b");
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
