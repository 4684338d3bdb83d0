#include "transport/identity.h"

namespace ballot::transport {

std::string_view role_name(Role role) noexcept {
  switch (role) {
    case Role::kServer:
      return "server";
    case Role::kNode:
      return "node";
  }
  return "unknown";
}

Result<Role> parse_role(std::string_view text) {
  if (text == "server") return Role::kServer;
  if (text == "node" || text == "worker") return Role::kNode;
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown role '" + std::string(text) + "' (expected 'server' or 'node')");
}

bool is_valid_role(std::uint8_t value) noexcept {
  return value == static_cast<std::uint8_t>(Role::kServer) || value == static_cast<std::uint8_t>(Role::kNode);
}

Status Registry::add(NodeId node, Role role, VerifyKey key) {
  if (entries_.count(node) != 0)
    return make_error(ErrorCode::kInvalidArgument, "node " + std::to_string(node) + " is registered twice");
  entries_.emplace(node, RegistryEntry{node, role, std::move(key)});
  return {};
}

const RegistryEntry* Registry::find(NodeId node) const {
  const auto it = entries_.find(node);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace ballot::transport
