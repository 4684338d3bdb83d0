#include "runtime/detail/lockstep_network.h"

#include <algorithm>

namespace ballot::runtime::detail {

void LockstepTime::advance_to(time_point to) {
  now_ = std::max(now_, to);
  // Delivering may not hold anything new (only endpoints that are ahead hold), so one pass.
  std::size_t due = 0;
  while (due < held_.size() && held_[due].due <= now_) ++due;
  std::vector<Held> delivering(std::make_move_iterator(held_.begin()), std::make_move_iterator(held_.begin() + due));
  held_.erase(held_.begin(), held_.begin() + due);
  // A receiver that is gone, or a full inbox, is the sender's peer failure: dropped, as a real
  // network would lose it.
  for (auto& frame : delivering) (void)frame.sender->send_frame(frame.to, std::move(frame.frame));
}

void LockstepTime::hold(time_point due, transport::Transport& sender, transport::NodeId to,
                        transport::OutboundFrame frame) {
  Held held{due, sent_++, &sender, to, std::move(frame)};
  const auto at = std::upper_bound(held_.begin(), held_.end(), held, [](const Held& a, const Held& b) {
    return a.due < b.due || (a.due == b.due && a.order < b.order);
  });
  held_.insert(at, std::move(held));
}

void LockstepTime::forget(const transport::Transport& sender) {
  std::erase_if(held_, [&](const Held& held) { return held.sender == &sender; });
}

std::optional<LockstepTime::time_point> LockstepTime::next_due() const {
  if (held_.empty()) return std::nullopt;
  return held_.front().due;
}

LockstepEndpoint::LockstepEndpoint(LockstepTime& time, std::unique_ptr<transport::MemoryTransport> inner,
                                   bool drives_time)
    : time_(time), inner_(std::move(inner)), drives_time_(drives_time) {}

LockstepEndpoint::~LockstepEndpoint() { time_.forget(*inner_); }

Status LockstepEndpoint::send_frame(transport::NodeId to, transport::OutboundFrame frame) {
  if (!drives_time_ && own_ > time_.now()) {
    time_.hold(own_, *inner_, to, std::move(frame));
    return {};
  }
  return inner_->send_frame(to, std::move(frame));
}

Result<transport::Message> LockstepEndpoint::receive(std::chrono::milliseconds timeout) {
  using std::chrono::milliseconds;
  auto message = inner_->receive(milliseconds(0));
  if (message.ok() || message.error().code != ErrorCode::kTimeout) return message;
  timeout = std::max(timeout, milliseconds(0));
  if (!drives_time_) {
    own_ = now() + timeout;
    return message;
  }
  auto until = time_.now() + timeout;
  if (const auto due = time_.next_due(); due && *due < until) until = *due;
  time_.advance_to(until);
  return inner_->receive(milliseconds(0));
}

SessionClock::time_point LockstepEndpoint::now() const { return std::max(time_.now(), own_); }

void LockstepEndpoint::sleep_for(std::chrono::milliseconds duration) {
  if (drives_time_) {
    time_.advance_to(time_.now() + duration);
  } else {
    own_ = now() + duration;
  }
}

}  // namespace ballot::runtime::detail
