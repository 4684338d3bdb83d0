// Time as the round sessions (runtime/node_session.h, runtime/server_session.h) see it: deadlines,
// rejoin and idle timers, and the delay attack's wait. The real steady clock in every engine that
// runs on real time (the process cluster, the simulator, Python); the lockstep engine
// (runtime/experiment.h) gives each session a virtual clock that moves only when the session
// waits, so a round whose deadline passes costs no wall time.
//
// Thread-safety: steady_session_clock() may be shared by any threads; a virtual clock is the
// lockstep engine's, on its one thread.
#pragma once

#include <chrono>
#include <memory>

namespace ballot::runtime {

class SessionClock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~SessionClock() = default;
  virtual time_point now() const = 0;
  // Waits `duration` (a real sleep, or virtual time moving on).
  virtual void sleep_for(std::chrono::milliseconds duration) = 0;
};

// The real one: std::chrono::steady_clock and std::this_thread::sleep_for.
std::shared_ptr<SessionClock> steady_session_clock();

}  // namespace ballot::runtime
