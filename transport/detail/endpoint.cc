#include "transport/detail/endpoint.h"

#include <exception>

#include "core/byte_io.h"

namespace ballot::transport::detail {

bool closes_session(Misbehaviour kind) noexcept {
  switch (kind) {
    case Misbehaviour::kMalformedFrame:
    case Misbehaviour::kOversize:
    case Misbehaviour::kTruncated:
    case Misbehaviour::kTimeout:
    case Misbehaviour::kHandshakeFailed:
    case Misbehaviour::kIdentityMismatch:
    case Misbehaviour::kUnknownSender:
    case Misbehaviour::kDuplicateSession:
      return true;
    default:
      return false;
  }
}

namespace {

VerifierOptions verifier_options(const TransportOptions& options) {
  VerifierOptions v;
  v.job = options.job;
  v.rounds_ahead = options.rounds_ahead;
  v.signature_cache = options.signature_cache;
  return v;
}

}  // namespace

EndpointCore::EndpointCore(LocalIdentity self, Registry registry, const TransportOptions& options,
                           bool require_signatures)
    : signer_(std::move(self.key), options.job, self.node, self.role),
      verifier_(std::move(registry), verifier_options(options)),
      options_(options),
      require_signatures_(require_signatures) {}

OutboundFrame EndpointCore::seal(MessageType type, std::uint64_t round,
                                 std::shared_ptr<const std::vector<std::uint8_t>> payload) {
  if (!require_signatures_) return make_unsigned_frame(type, std::move(payload));
  return signer_.seal(type, round, std::move(payload));
}

OutboundFrame EndpointCore::hello() {
  ByteWriter payload;
  payload.put<std::uint32_t>(self());
  auto id = std::make_shared<std::vector<std::uint8_t>>(payload.take());
  return seal(MessageType::kHello, 0, std::move(id));
}

void EndpointCore::report(std::optional<NodeId> peer, Misbehaviour kind, Error error) {
  if (peer) {
    std::lock_guard<std::mutex> lock(counts_mutex_);
    auto& counts = counts_[*peer];
    ++counts[static_cast<std::size_t>(kind)];
  }
  if (options_.observer) {
    // An observer must not take the I/O thread down with it.
    try {
      options_.observer->on_misbehaviour(MisbehaviourReport{peer, kind, std::move(error)});
    } catch (...) {
    }
  }
}

MisbehaviourCounts EndpointCore::counts(NodeId peer) const {
  std::lock_guard<std::mutex> lock(counts_mutex_);
  const auto it = counts_.find(peer);
  return it == counts_.end() ? MisbehaviourCounts{} : it->second;
}

std::optional<Misbehaviour> EndpointCore::accept(NodeId peer, const FrameHeader& header, ByteSpan meta,
                                                 PayloadBytes payload, const Digest* computed) {
  auto fail = [&](Misbehaviour kind, ErrorCode code, std::string message) {
    report(peer, kind, make_error(code, std::move(message), peer));
    return std::optional<Misbehaviour>(kind);
  };
  if (header.type == MessageType::kHello)
    return fail(Misbehaviour::kMalformedFrame, ErrorCode::kMalformed, "hello after the session began");
  Message message;
  message.from = peer;
  message.type = header.type;
  if (header.is_signed()) {
    auto envelope = decode_envelope(meta);
    if (!envelope.ok()) return fail(Misbehaviour::kMalformedFrame, ErrorCode::kMalformed, envelope.error().message);
    if (envelope->header.type != header.type || envelope->header.payload_length != header.payload_length)
      return fail(Misbehaviour::kMalformedFrame, ErrorCode::kMalformed, "envelope disagrees with its frame header");
    Verdict verdict = computed != nullptr ? verifier_.verify(*envelope, payload, *computed, peer)
                                          : verifier_.verify(*envelope, payload, peer);
    if (!verdict.ok()) {
      if (verdict.proof && options_.observer) {
        try {
          options_.observer->on_equivocation(*verdict.proof);
        } catch (...) {
        }
      }
      report(peer, verdict.kind, std::move(verdict.status).error());
      return verdict.kind;
    }
    message.round = envelope->header.round;
    message.sequence = envelope->header.sequence;
    message.envelope = *envelope;
  } else if (require_signatures_) {
    return fail(Misbehaviour::kMalformedFrame, ErrorCode::kAuthentication,
                "unsigned frame on an authenticated session");
  }
  message.payload = std::move(payload);
  push(std::move(message));
  return std::nullopt;
}

std::optional<Misbehaviour> EndpointCore::accept_bytes(NodeId peer, ByteSpan bytes) {
  auto fail = [&](Misbehaviour kind, Error error) {
    error.peer = peer;
    report(peer, kind, std::move(error));
    return std::optional<Misbehaviour>(kind);
  };
  if (bytes.size() < kFrameHeaderSize)
    return fail(Misbehaviour::kTruncated, make_error(ErrorCode::kMalformed, "truncated frame header"));
  auto header = decode_frame_header(bytes.first(kFrameHeaderSize), options_.limits);
  if (!header.ok())
    return fail(
        header.error().code == ErrorCode::kLimitExceeded ? Misbehaviour::kOversize : Misbehaviour::kMalformedFrame,
        header.error());
  if (auto permitted = permits(peer, header->type); !permitted.ok())
    return fail(Misbehaviour::kNotPermitted, std::move(permitted).error());
  const std::size_t available = bytes.size() - kFrameHeaderSize;
  if (header->meta_length > available || header->payload_length > available - header->meta_length)
    return fail(Misbehaviour::kTruncated, make_error(ErrorCode::kMalformed, "truncated frame"));
  if (header->payload_length != available - header->meta_length)
    return fail(Misbehaviour::kMalformedFrame, make_error(ErrorCode::kMalformed, "trailing bytes after frame"));
  const ByteSpan meta = bytes.subspan(kFrameHeaderSize, header->meta_length);
  const ByteSpan payload = bytes.subspan(kFrameHeaderSize + header->meta_length);
  return accept(peer, *header, meta, PayloadBytes(payload.begin(), payload.end()));
}

Status EndpointCore::permits(NodeId peer, MessageType type) const {
  const RegistryEntry* entry = verifier_.registry().find(peer);
  if (entry == nullptr || role_may_send(entry->role, type)) return {};  // an unknown peer fails later, by name
  return make_error(ErrorCode::kAuthentication,
                    std::string(role_name(entry->role)) + " " + std::to_string(peer) + " may not send " +
                        std::string(message_type_name(type)),
                    peer);
}

// What a queued message counts against max_inbox_bytes: its payload and its own bookkeeping
// (the envelope, the list node), so that a flood of empty frames fills the inbox too.
static std::size_t inbox_cost(const Message& message) { return message.payload.size() + sizeof(Message) + 64; }

void EndpointCore::push(Message message) {
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    inbox_bytes_ += inbox_cost(message);
    inbox_.push_back(std::move(message));
  }
  inbox_ready_.notify_one();
}

bool EndpointCore::has_space() const {
  std::lock_guard<std::mutex> lock(inbox_mutex_);
  return inbox_bytes_ < options_.max_inbox_bytes || inbox_.empty();
}

void EndpointCore::when_space(std::function<void()> resume) {
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    if (!(inbox_bytes_ < options_.max_inbox_bytes || inbox_.empty() || inbox_closed_)) {
      waiting_for_space_.push_back(std::move(resume));
      return;
    }
  }
  resume();
}

bool EndpointCore::wait_for_space(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(inbox_mutex_);
  return inbox_space_.wait_until(
      lock, deadline, [&] { return inbox_closed_ || inbox_bytes_ < options_.max_inbox_bytes || inbox_.empty(); });
}

Result<Message> EndpointCore::pop(std::chrono::milliseconds timeout) {
  std::vector<std::function<void()>> resume;
  Message message;
  {
    std::unique_lock<std::mutex> lock(inbox_mutex_);
    if (!inbox_ready_.wait_for(lock, timeout, [&] { return !inbox_.empty() || inbox_closed_; }))
      return make_error(ErrorCode::kTimeout, "no message within " + std::to_string(timeout.count()) + " ms");
    if (inbox_.empty()) return make_error(ErrorCode::kUnavailable, "transport closed");
    message = std::move(inbox_.front());
    inbox_.pop_front();
    inbox_bytes_ -= inbox_cost(message);
    if (inbox_bytes_ < options_.max_inbox_bytes) resume.swap(waiting_for_space_);
  }
  inbox_space_.notify_all();
  for (auto& callback : resume) callback();
  return message;
}

void EndpointCore::close_inbox() {
  std::vector<std::function<void()>> resume;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    inbox_closed_ = true;
    resume.swap(waiting_for_space_);
  }
  inbox_ready_.notify_all();
  inbox_space_.notify_all();
  for (auto& callback : resume) callback();
}

}  // namespace ballot::transport::detail
