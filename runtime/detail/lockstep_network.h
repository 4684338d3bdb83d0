// Virtual time for the lockstep engine (runtime/experiment.h): the server and node sessions run on
// one thread, each endpoint of the in-memory network wrapped so that waiting costs no wall time.
//
// One clock, the run's, moves forward only when the server waits (its receive finds nothing).
// A node that waits, or sleeps (the delay attack), moves its own time ahead of the run's instead:
// what it sends meanwhile is held and delivered when the run's time reaches the node's — a vote
// delayed past the deadline arrives after the server decided, as on a real network. Nothing is
// delivered out of the order of its sending time.
//
// Thread-safety: none; the engine's one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/session_clock.h"
#include "transport/memory_transport.h"

namespace ballot::runtime::detail {

// The run's time and the frames sent ahead of it.
class LockstepTime {
 public:
  using time_point = SessionClock::time_point;
  time_point now() const noexcept { return now_; }
  // Moves the run's time to `to` (never back), delivering the held frames due by then in order.
  void advance_to(time_point to);
  // Delivers `frame` from `sender` to `to` when the run's time reaches `due`.
  void hold(time_point due, transport::Transport& sender, transport::NodeId to, transport::OutboundFrame frame);
  // Drops what `sender` holds (its endpoint is going away).
  void forget(const transport::Transport& sender);
  std::optional<time_point> next_due() const;

 private:
  struct Held {
    time_point due;
    std::uint64_t order = 0;
    transport::Transport* sender = nullptr;
    transport::NodeId to = 0;
    transport::OutboundFrame frame;
  };
  time_point now_{};
  std::uint64_t sent_ = 0;
  std::vector<Held> held_;  // by (due, order)
};

// One participant's endpoint: the in-memory transport, and the session's clock. The server's
// (`drives_time`) waits by moving the run's time; a node's by moving its own.
class LockstepEndpoint final : public transport::Transport, public SessionClock {
 public:
  LockstepEndpoint(LockstepTime& time, std::unique_ptr<transport::MemoryTransport> inner, bool drives_time);
  ~LockstepEndpoint() override;

  transport::NodeId self() const override { return inner_->self(); }
  transport::OutboundFrame seal(transport::MessageType type, std::uint64_t round,
                                std::shared_ptr<const std::vector<std::uint8_t>> payload) override {
    return inner_->seal(type, round, std::move(payload));
  }
  Status send_frame(transport::NodeId to, transport::OutboundFrame frame) override;
  // What has arrived, at once; else the wait passes in virtual time and kTimeout (the server's:
  // unless a held frame comes due within it, which it then delivers).
  Result<transport::Message> receive(std::chrono::milliseconds timeout) override;
  const transport::FrameLimits& limits() const override { return inner_->limits(); }
  void set_round(std::uint64_t round) override { inner_->set_round(round); }
  void reset_round(std::uint64_t round) override { inner_->reset_round(round); }
  Status check_relayed(const transport::SignedEnvelope& envelope, transport::ByteSpan payload) const override {
    return inner_->check_relayed(envelope, payload);
  }
  transport::MisbehaviourCounts misbehaviour_counts(transport::NodeId peer) const override {
    return inner_->misbehaviour_counts(peer);
  }

  time_point now() const override;
  void sleep_for(std::chrono::milliseconds duration) override;

 private:
  LockstepTime& time_;
  std::unique_ptr<transport::MemoryTransport> inner_;
  bool drives_time_;
  time_point own_{};  // a node's time when ahead of the run's
};

}  // namespace ballot::runtime::detail
