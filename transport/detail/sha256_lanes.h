// Internal: SHA-256 of several equal-length messages at once, for the payload tree digest
// (transport/crypto.h, payload_digest).
//
// Why: one SHA-256 stream costs ~1 s/GB here even with SHA-NI, and hashing independent
// messages in lock-step on SHA-NI ("multi-buffer") gains little on this CPU: sha256rnds2
// issues only ~1.3x faster than its latency (bench/transport/RESULTS.md). AVX-512 instead runs
// the scalar algorithm on 16 messages at once, one per 32-bit lane (rotates, three-input logic),
// which is ~2x faster per byte than SHA-NI. The payload tree (transport/crypto.h) supplies the
// independent messages: its leaves.
//
// Every lane computes plain FIPS 180-4 SHA-256; tests/transport/crypto_test.cc checks each lane
// bit-exactly against OpenSSL. Below kernels::active_isa() == kAvx512 (no AVX-512, or the level
// capped by kernels::set_isa_limit / BALLOT_ISA, kernels/isa.h) the messages are hashed one by one
// with OpenSSL (SHA-NI where present).
//
// Thread-safety: pure functions. Complexity: O(count * length).
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/crypto.h"

namespace ballot::transport::detail {

inline constexpr std::size_t kSha256Lanes = 16;
// Fewer messages than this are hashed one by one with OpenSSL (a group costs as much as 16).
inline constexpr std::size_t kSha256MinLanes = 8;

// Whether the 16-lane AVX-512 kernel runs on this CPU (checked once).
bool sha256_x16_available();

// out[i] = SHA-256(messages[i][0 .. length)) for i < count, any count: groups of up to 16 on
// AVX-512, the rest with OpenSSL.
void sha256_equal_length(const std::uint8_t* const* messages, std::size_t count, std::size_t length, Digest* out);

// The 16-lane kernel alone: 1 <= count <= 16 messages. Precondition: sha256_x16_available().
void sha256_x16(const std::uint8_t* const* messages, std::size_t count, std::size_t length, Digest* out);

}  // namespace ballot::transport::detail
