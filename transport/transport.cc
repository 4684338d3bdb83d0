#include "transport/transport.h"

#include <string>

namespace ballot::transport {

Status Transport::send(NodeId to, MessageType type, std::uint64_t round, std::vector<std::uint8_t> payload) {
  return broadcast({to}, type, round, std::move(payload));
}

Status Transport::broadcast(const std::vector<NodeId>& to, MessageType type, std::uint64_t round,
                            std::vector<std::uint8_t> payload) {
  if (payload.size() > limits().limit(type))
    return make_error(ErrorCode::kInvalidArgument, std::string(message_type_name(type)) + " payload of " +
                                                       std::to_string(payload.size()) + " bytes exceeds the limit");
  auto shared = std::make_shared<const std::vector<std::uint8_t>>(std::move(payload));
  const OutboundFrame frame = seal(type, round, std::move(shared));
  Status first;
  for (NodeId peer : to) {
    Status status = send_frame(peer, frame);
    if (!status.ok() && first.ok()) first = std::move(status);
  }
  return first;
}

}  // namespace ballot::transport
