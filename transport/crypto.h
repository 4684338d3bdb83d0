// Cryptographic primitives of the transport: SHA-256 digests and Ed25519 keys (OpenSSL 3).
//
// Ed25519 is used hash-then-sign: envelopes sign a short fixed-width header that contains
// SHA-256(payload), so a large payload is hashed once (SHA-256, hardware-accelerated) instead of
// twice with SHA-512 as pure Ed25519 over the payload would (DESIGN.md, security model).
// Verification is OpenSSL's RFC 8032 verifier; tests/transport/crypto_test.cc checks it against all
// 151 Wycheproof vectors so that every Ballot verifier agrees on every edge case.
//
// Thread-safety: SigningKey and VerifyKey are immutable after construction; sign() and verify()
// may be called concurrently from any number of threads. Copies share the underlying key.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/result.h"

namespace ballot::transport {

inline constexpr std::size_t kDigestSize = 32;        // SHA-256
inline constexpr std::size_t kPublicKeySize = 32;     // Ed25519 (RFC 8032 encoding)
inline constexpr std::size_t kPrivateKeySize = 32;    // Ed25519 seed
inline constexpr std::size_t kSignatureSize = 64;     // Ed25519 R ‖ S

using Digest = std::array<std::uint8_t, kDigestSize>;
using PublicKeyBytes = std::array<std::uint8_t, kPublicKeySize>;
using Signature = std::array<std::uint8_t, kSignatureSize>;
using ByteSpan = std::span<const std::uint8_t>;

// SHA-256 of `data`. O(size), deterministic, thread-safe.
Digest sha256(ByteSpan data);

// Lowercase hex of bytes, for logs, fingerprints and test vectors.
std::string to_hex(ByteSpan data);

// An Ed25519 public key that verifies signatures.
class VerifyKey {
 public:
  VerifyKey() = default;  // empty: verifies nothing
  // Accepts any 32-byte string; a string that is not a valid point makes verify() return false.
  static Result<VerifyKey> from_bytes(ByteSpan raw);

  // True iff `signature` is a valid Ed25519 signature of `message` under this key (RFC 8032,
  // with S < L enforced). Any signature length other than 64 returns false. O(|message|).
  bool verify(ByteSpan message, ByteSpan signature) const;

  const PublicKeyBytes& bytes() const noexcept { return bytes_; }
  bool operator==(const VerifyKey& other) const noexcept { return bytes_ == other.bytes_; }

  struct Impl;  // holds the OpenSSL EVP_PKEY

 private:
  VerifyKey(std::shared_ptr<const Impl> impl, PublicKeyBytes bytes)
      : impl_(std::move(impl)), bytes_(bytes) {}
  std::shared_ptr<const Impl> impl_;
  PublicKeyBytes bytes_{};
  friend struct KeyAccess;
};

// An Ed25519 private key. Never printed, never copied into logs.
class SigningKey {
 public:
  SigningKey() = default;  // empty: sign() is a precondition failure
  static Result<SigningKey> generate();
  // From the 32-byte RFC 8032 seed.
  static Result<SigningKey> from_seed(ByteSpan seed);

  Signature sign(ByteSpan message) const;
  const VerifyKey& verify_key() const noexcept { return verify_key_; }

  struct Impl;

 private:
  SigningKey(std::shared_ptr<const Impl> impl, VerifyKey verify_key)
      : impl_(std::move(impl)), verify_key_(std::move(verify_key)) {}
  std::shared_ptr<const Impl> impl_;
  VerifyKey verify_key_;
  friend struct KeyAccess;
};

}  // namespace ballot::transport
