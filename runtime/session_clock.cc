#include "runtime/session_clock.h"

#include <thread>

namespace ballot::runtime {
namespace {

class SteadyClock final : public SessionClock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
  void sleep_for(std::chrono::milliseconds duration) override { std::this_thread::sleep_for(duration); }
};

}  // namespace

std::shared_ptr<SessionClock> steady_session_clock() {
  static const auto clock = std::make_shared<SteadyClock>();
  return clock;
}

}  // namespace ballot::runtime
