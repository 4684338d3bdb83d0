// Signatures already verified in this process: (public key, signed bytes, signature) triples for
// which VerifyKey::verify returned true. Verification is a pure function of the three, so a
// receiver that meets the same triple again may skip the curve arithmetic — the same sealed frame
// broadcast to many receivers of one process (MemoryNetwork: a round start or a decision verified
// once instead of n times). The key is the exact bytes, not a hash of them: no collision can admit
// a forgery. Only successes are remembered. Bounded: the oldest entries are forgotten first.
//
// Thread-safety: all member functions may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_set>

#include "transport/crypto.h"

namespace ballot::transport {

class SignatureCache {
 public:
  explicit SignatureCache(std::size_t capacity = 4096);

  // key.verify(message, signature), answered from the cache when the triple verified before.
  bool verify(const VerifyKey& key, ByteSpan message, ByteSpan signature);

  std::uint64_t hits() const;
  std::size_t size() const;

 private:
  mutable std::mutex mutex_;  // guards everything below
  std::size_t capacity_;
  std::unordered_set<std::string> verified_;
  std::deque<std::string> order_;  // oldest first
  std::uint64_t hits_ = 0;
};

}  // namespace ballot::transport
