// Sends that fail for one peer do not stop a session: a restarting server, a crashed node whose
// queue filled up, a peer that is gone — round deadlines and Join recover from all of them. Only a
// closed transport (kUnavailable) ends the session. Shared by the server and node sessions.
#pragma once

#include <cstdint>
#include <utility>

#include "core/result.h"

namespace ballot::runtime::detail {

// `status` unless it is a peer failure, which is counted in `failures` and tolerated.
inline Status tolerate_peer_failure(Status status, std::uint64_t& failures) {
  if (status.ok() || status.error().code != ErrorCode::kUnavailable) {
    if (!status.ok()) ++failures;
    return {};
  }
  return status;
}

}  // namespace ballot::runtime::detail
