#include "transport/crypto.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include <algorithm>

#include "core/byte_io.h"
#include "core/enforce.h"
#include "transport/detail/ossl.h"
#include "transport/detail/sha256_lanes.h"

namespace ballot::transport {
namespace detail {

std::string take_openssl_errors() {
  std::string text;
  unsigned long code = 0;
  while ((code = ERR_get_error()) != 0) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof(buffer));
    if (!text.empty()) text += "; ";
    text += buffer;
  }
  return text.empty() ? std::string("no OpenSSL error recorded") : text;
}

}  // namespace detail

namespace {

// Fetched once: implicit fetching by name on every call costs a provider lookup (OpenSSL 3).
const EVP_MD* sha256_md() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  BALLOT_ENFORCE(md != nullptr, "OpenSSL has no SHA256 implementation");
  return md;
}

}  // namespace

Digest sha256(ByteSpan data) {
  Digest digest{};
  unsigned int length = 0;
  const int ok = EVP_Digest(data.data(), data.size(), digest.data(), &length, sha256_md(), nullptr);
  BALLOT_ENFORCE(ok == 1 && length == kDigestSize, "EVP_Digest(SHA256) failed");
  return digest;
}

void PayloadDigester::reset(std::uint64_t length) {
  length_ = length;
  leaves_.clear();
}

void PayloadDigester::update(ByteSpan prefix) {
  BALLOT_ENFORCE(prefix.size() <= length_, "PayloadDigester: prefix longer than the payload");
  if (!detail::sha256_x16_available()) return;  // one by one: nothing gained by hashing early
  std::size_t hashed = leaves_.size() / kDigestSize;
  const std::size_t complete = prefix.size() / kPayloadLeafSize;
  // Whole groups only: 16 leaves cost one pass of the 16-lane kernel.
  while (complete - hashed >= detail::kSha256Lanes) {
    hash_leaves(prefix, hashed, detail::kSha256Lanes);
    hashed += detail::kSha256Lanes;
  }
}

void PayloadDigester::hash_leaves(ByteSpan payload, std::size_t first, std::size_t count) {
  const std::uint8_t* leaves[detail::kSha256Lanes];
  Digest digests[detail::kSha256Lanes];
  for (std::size_t done = 0; done < count;) {
    const std::size_t n = std::min(count - done, detail::kSha256Lanes);
    for (std::size_t l = 0; l < n; ++l) leaves[l] = payload.data() + (first + done + l) * kPayloadLeafSize;
    detail::sha256_equal_length(leaves, n, kPayloadLeafSize, digests);
    for (std::size_t l = 0; l < n; ++l) leaves_.insert(leaves_.end(), digests[l].begin(), digests[l].end());
    done += n;
  }
}

Digest PayloadDigester::finish(ByteSpan payload) {
  BALLOT_ENFORCE(payload.size() == length_, "PayloadDigester: payload length differs from the announced one");
  const std::size_t hashed = leaves_.size() / kDigestSize;
  const std::size_t complete = payload.size() / kPayloadLeafSize;
  const std::size_t count = (payload.size() + kPayloadLeafSize - 1) / kPayloadLeafSize;
  leaves_.reserve(count * kDigestSize + 8);
  hash_leaves(payload, hashed, complete - hashed);
  if (count > complete) {
    const Digest last = sha256(payload.subspan(complete * kPayloadLeafSize));
    leaves_.insert(leaves_.end(), last.begin(), last.end());
  }
  ByteWriter length;
  length.put<std::uint64_t>(payload.size());
  leaves_.insert(leaves_.end(), length.bytes().begin(), length.bytes().end());
  const Digest root = sha256(leaves_);
  leaves_.clear();
  return root;
}

Digest payload_digest(ByteSpan payload) {
  PayloadDigester digester(payload.size());
  return digester.finish(payload);
}

std::string to_hex(ByteSpan data) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(2 * data.size());
  for (std::uint8_t byte : data) {
    text.push_back(kDigits[byte >> 4]);
    text.push_back(kDigits[byte & 15]);
  }
  return text;
}

Result<VerifyKey> KeyAccess::verify_from_pkey(detail::PkeyPtr key) {
  if (!key || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519)
    return make_error(ErrorCode::kInvalidArgument, "not an Ed25519 key");
  PublicKeyBytes bytes{};
  std::size_t length = bytes.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), bytes.data(), &length) != 1 || length != bytes.size())
    return make_error(ErrorCode::kMalformed, "cannot read Ed25519 public key: " + detail::take_openssl_errors());
  return VerifyKey(std::make_shared<const VerifyKey::Impl>(std::move(key)), bytes);
}

Result<SigningKey> KeyAccess::signing_from_pkey(detail::PkeyPtr key) {
  if (!key || EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519)
    return make_error(ErrorCode::kInvalidArgument, "not an Ed25519 key");
  PublicKeyBytes bytes{};
  std::size_t length = bytes.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), bytes.data(), &length) != 1 || length != bytes.size())
    return make_error(ErrorCode::kMalformed, "cannot read Ed25519 public key: " + detail::take_openssl_errors());
  BALLOT_ASSIGN_OR_RETURN(VerifyKey verify_key, VerifyKey::from_bytes(bytes));
  return SigningKey(std::make_shared<const SigningKey::Impl>(std::move(key)), std::move(verify_key));
}

Result<VerifyKey> VerifyKey::from_bytes(ByteSpan raw) {
  if (raw.size() != kPublicKeySize)
    return make_error(ErrorCode::kInvalidArgument,
                      "Ed25519 public key must be 32 bytes, got " + std::to_string(raw.size()));
  detail::PkeyPtr key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw.data(), raw.size()));
  if (!key) return make_error(ErrorCode::kMalformed, "bad Ed25519 public key: " + detail::take_openssl_errors());
  PublicKeyBytes bytes{};
  std::copy(raw.begin(), raw.end(), bytes.begin());
  return VerifyKey(std::make_shared<const Impl>(std::move(key)), bytes);
}

bool VerifyKey::verify(ByteSpan message, ByteSpan signature) const {
  if (signature.size() != kSignatureSize || !impl_) return false;
  detail::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) return false;
  // Ed25519 takes no digest: EVP_DigestVerify is the one-shot interface (RFC 8032 PureEdDSA).
  if (EVP_DigestVerifyInit_ex(ctx.get(), nullptr, nullptr, nullptr, nullptr, impl_->pkey.get(), nullptr) != 1) {
    ERR_clear_error();
    return false;
  }
  const int ok = EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), message.data(), message.size());
  if (ok != 1) ERR_clear_error();  // a bad signature leaves entries on the error queue
  return ok == 1;
}

Result<SigningKey> SigningKey::generate() {
  detail::PkeyCtxPtr ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &raw) != 1)
    return make_error(ErrorCode::kInternal, "Ed25519 key generation failed: " + detail::take_openssl_errors());
  return KeyAccess::signing_from_pkey(detail::PkeyPtr(raw));
}

Result<SigningKey> SigningKey::from_seed(ByteSpan seed) {
  if (seed.size() != kPrivateKeySize)
    return make_error(ErrorCode::kInvalidArgument, "Ed25519 seed must be 32 bytes, got " + std::to_string(seed.size()));
  detail::PkeyPtr key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed.data(), seed.size()));
  if (!key) return make_error(ErrorCode::kMalformed, "bad Ed25519 seed: " + detail::take_openssl_errors());
  return KeyAccess::signing_from_pkey(std::move(key));
}

Signature SigningKey::sign(ByteSpan message) const {
  BALLOT_ENFORCE(impl_ != nullptr, "sign() on an empty SigningKey");
  Signature signature{};
  detail::MdCtxPtr ctx(EVP_MD_CTX_new());
  std::size_t length = signature.size();
  const bool ok =
      ctx && EVP_DigestSignInit_ex(ctx.get(), nullptr, nullptr, nullptr, nullptr, impl_->pkey.get(), nullptr) == 1 &&
      EVP_DigestSign(ctx.get(), signature.data(), &length, message.data(), message.size()) == 1;
  BALLOT_ENFORCE(ok && length == kSignatureSize, "Ed25519 signing failed: " + detail::take_openssl_errors());
  return signature;
}

}  // namespace ballot::transport
