// Progress display of an evaluation grid: cells done / total, a bar over the work done (rounds ×
// nodes, the engine's cost unit, so that big cells weigh more), elapsed time and an ETA.
// On a terminal the bar is redrawn in place (at most every 200 ms) and finished cells print a line
// above it; otherwise (a pipe, a log file) only the finished-cell lines are printed, each with the
// counts and the ETA. Thread-safety: every member function may be called from any thread.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace ballot::evaluation {

// "45s", "3m05s", "1h02m"; negative or non-finite values print "?".
std::string format_duration(double seconds);

class ProgressBar {
 public:
  // `out` null: silent. `interactive`: redraw in place (see is_terminal).
  ProgressBar(std::FILE* out, bool interactive, std::size_t total_cells, double total_work);

  static bool is_terminal(std::FILE* out);

  // Work units done inside running cells (rounds × n).
  void add_work(double units);
  // One cell finished (or was skipped); `line` describes it. Skipped cells carry their work so
  // that the ETA does not count them.
  void cell_done(const std::string& line, double remaining_work_of_cell = 0.0);
  // Final redraw and newline on a terminal.
  void finish();

  // The status text after `elapsed` seconds: "[#####.....] 12/39 cells  43%  2m10s elapsed, ETA 3m01s".
  std::string status(double elapsed_seconds) const;

 private:
  void draw_locked(bool force);
  std::string status_locked(double elapsed_seconds) const;
  double elapsed() const;

  std::FILE* out_;
  bool interactive_;
  std::size_t total_cells_;
  double total_work_;
  std::size_t cells_done_ = 0;
  double work_done_ = 0.0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
  mutable std::mutex mutex_;
};

}  // namespace ballot::evaluation
