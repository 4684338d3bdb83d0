#include "transport/signature_cache.h"

#include <algorithm>

namespace ballot::transport {

SignatureCache::SignatureCache(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

bool SignatureCache::verify(const VerifyKey& key, ByteSpan message, ByteSpan signature) {
  // key ‖ signature ‖ message: fixed-size fields first, so distinct triples give distinct strings.
  std::string entry;
  entry.reserve(key.bytes().size() + signature.size() + message.size() + 1);
  entry.append(reinterpret_cast<const char*>(key.bytes().data()), key.bytes().size());
  entry.push_back(static_cast<char>(signature.size()));
  entry.append(reinterpret_cast<const char*>(signature.data()), signature.size());
  entry.append(reinterpret_cast<const char*>(message.data()), message.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (verified_.count(entry) != 0) {
      ++hits_;
      return true;
    }
  }
  if (!key.verify(message, signature)) return false;  // outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  if (!verified_.insert(entry).second) return true;
  order_.push_back(std::move(entry));
  while (order_.size() > capacity_) {
    verified_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

std::uint64_t SignatureCache::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

std::size_t SignatureCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return verified_.size();
}

}  // namespace ballot::transport
