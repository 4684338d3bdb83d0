// Identities of a Ballot cluster and the pinned registry that maps each to its key.
//
// A node id is a 32-bit number chosen by the operator; its role says what it may send (the
// server broadcasts round starts and results, nodes send gradients and votes). The registry is
// pinned: it holds the exact Ed25519 public key of every participant, loaded from certificates
// checked against the cluster CA (transport/pki.h), so a certificate the CA issued to someone else,
// or a second certificate for the same id with another key, does not verify.
//
// Thread-safety: Registry is a value; const access from many threads is safe, mutation is not.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/result.h"
#include "transport/crypto.h"

namespace ballot::transport {

using NodeId = std::uint32_t;

enum class Role : std::uint8_t {
  kServer = 1,  // the (trusted) aggregator of DESIGN.md's round protocol
  kNode = 2,    // a worker that also acts as an intermediate voter
};

// "server" / "node"; parse_role accepts exactly these (and "worker" as a synonym of "node").
std::string_view role_name(Role role) noexcept;
Result<Role> parse_role(std::string_view text);
bool is_valid_role(std::uint8_t value) noexcept;

struct RegistryEntry {
  NodeId node = 0;
  Role role = Role::kNode;
  VerifyKey key;
};

class Registry {
 public:
  // Adds a participant; a second entry for the same id is an error (kInvalidArgument).
  Status add(NodeId node, Role role, VerifyKey key);
  // nullptr when the id is not registered. O(log n).
  const RegistryEntry* find(NodeId node) const;
  std::size_t size() const noexcept { return entries_.size(); }
  const std::map<NodeId, RegistryEntry>& entries() const noexcept { return entries_; }

 private:
  std::map<NodeId, RegistryEntry> entries_;
};

}  // namespace ballot::transport
