// Cryptographic primitives of the transport: SHA-256 digests, the payload tree digest and
// Ed25519 keys (OpenSSL 3).
//
// Ed25519 is used hash-then-sign: envelopes sign a short fixed-width header that contains
// payload_digest(payload) (a SHA-256 tree, below), so a large payload is hashed once instead of
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
#include <vector>

#include "core/result.h"

namespace ballot::transport {

inline constexpr std::size_t kDigestSize = 32;      // SHA-256
inline constexpr std::size_t kPublicKeySize = 32;   // Ed25519 (RFC 8032 encoding)
inline constexpr std::size_t kPrivateKeySize = 32;  // Ed25519 seed
inline constexpr std::size_t kSignatureSize = 64;   // Ed25519 R ‖ S

using Digest = std::array<std::uint8_t, kDigestSize>;
using PublicKeyBytes = std::array<std::uint8_t, kPublicKeySize>;
using Signature = std::array<std::uint8_t, kSignatureSize>;
using ByteSpan = std::span<const std::uint8_t>;

// SHA-256 of `data`. O(size), deterministic, thread-safe.
Digest sha256(ByteSpan data);

// ---- The payload digest that envelopes sign (protocol version 2, docs/protocol.md) ----
//
// A one-level SHA-256 tree over fixed 16 KiB leaves:
//   D_i  = SHA-256(payload[i*L, min((i+1)*L, n)))        for i < k = ceil(n / L), L = 16 KiB
//   root = SHA-256(D_0 || ... || D_{k-1} || le64(n))       (n = 0: k = 0, root = SHA-256(le64(0)))
// Each leaf is plain SHA-256, so the leaves are independent: 16 of them are hashed at once with
// AVX-512 (transport/detail/sha256_lanes.h), about twice as fast per byte as one SHA-NI stream,
// and a receiver hashes leaves as they arrive, while they are still in cache. Collision resistance is
// that of SHA-256: n fixes k and the leaf boundaries, so two different payloads with one root
// need a SHA-256 collision at the root or in a leaf.
inline constexpr std::size_t kPayloadLeafSize = 16 * 1024;

// The root above. O(n), deterministic, thread-safe.
Digest payload_digest(ByteSpan payload);

// The same, incrementally over a payload that arrives in order into one buffer (the receive
// path): update() with a growing prefix hashes the complete leaves not hashed yet (in groups of
// 16, the lanes of the AVX-512 kernel), finish() the rest. Memory: 32 bytes per hashed leaf, i.e. in
// proportion to the bytes that actually arrived, never to an announced length.
// Not thread-safe (one per session); reusable after reset().
class PayloadDigester {
 public:
  explicit PayloadDigester(std::uint64_t length = 0) { reset(length); }
  void reset(std::uint64_t length);
  // `prefix` = the first prefix.size() <= length bytes of the payload (the same bytes each call;
  // the buffer may move between calls).
  void update(ByteSpan prefix);
  // `payload` = the whole payload, payload.size() == length. Afterwards call reset() to reuse.
  Digest finish(ByteSpan payload);

 private:
  void hash_leaves(ByteSpan payload, std::size_t first, std::size_t count);

  std::uint64_t length_ = 0;
  std::vector<std::uint8_t> leaves_;  // D_0 || D_1 || ... of the leaves hashed so far
};

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
  VerifyKey(std::shared_ptr<const Impl> impl, PublicKeyBytes bytes) : impl_(std::move(impl)), bytes_(bytes) {}
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
