#include "evaluation/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace ballot::evaluation {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<long long>(std::llround(seconds));
  char text[32];
  if (total < 60) {
    std::snprintf(text, sizeof(text), "%llds", total);
  } else if (total < 3600) {
    std::snprintf(text, sizeof(text), "%lldm%02llds", total / 60, total % 60);
  } else {
    std::snprintf(text, sizeof(text), "%lldh%02lldm", total / 3600, (total % 3600) / 60);
  }
  return text;
}

ProgressBar::ProgressBar(std::FILE* out, bool interactive, std::size_t total_cells, double total_work)
    : out_(out), interactive_(interactive), total_cells_(total_cells), total_work_(std::max(total_work, 0.0)) {}

bool ProgressBar::is_terminal(std::FILE* out) { return out != nullptr && ::isatty(::fileno(out)) == 1; }

double ProgressBar::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string ProgressBar::status(double elapsed_seconds) const {
  std::lock_guard lock(mutex_);
  return status_locked(elapsed_seconds);
}

std::string ProgressBar::status_locked(double elapsed_seconds) const {
  const double fraction = total_work_ > 0 ? std::clamp(work_done_ / total_work_, 0.0, 1.0)
                                          : (total_cells_ ? static_cast<double>(cells_done_) / total_cells_ : 1.0);
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(std::floor(fraction * kWidth));
  std::string bar = "[" + std::string(static_cast<std::size_t>(filled), '#') +
                    std::string(static_cast<std::size_t>(kWidth - filled), '.') + "]";
  // The rate so far predicts the rest; nothing done yet means no estimate.
  const double eta = fraction > 0 ? elapsed_seconds * (1.0 - fraction) / fraction : -1.0;
  char text[160];
  std::snprintf(text, sizeof(text), "%s %zu/%zu cells %3.0f%%  %s elapsed, ETA %s", bar.c_str(), cells_done_,
                total_cells_, 100.0 * fraction, format_duration(elapsed_seconds).c_str(), format_duration(eta).c_str());
  return text;
}

void ProgressBar::draw_locked(bool force) {
  if (out_ == nullptr || !interactive_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  std::fprintf(out_, "\r\033[K%s", status_locked(elapsed()).c_str());
  std::fflush(out_);
}

void ProgressBar::add_work(double units) {
  std::lock_guard lock(mutex_);
  work_done_ += units;
  draw_locked(false);
}

void ProgressBar::cell_done(const std::string& line, double remaining_work_of_cell) {
  std::lock_guard lock(mutex_);
  ++cells_done_;
  work_done_ += std::max(remaining_work_of_cell, 0.0);
  if (out_ == nullptr) return;
  if (interactive_) {
    std::fprintf(out_, "\r\033[K%s\n", line.c_str());
    draw_locked(true);
  } else {
    std::fprintf(out_, "[%zu/%zu] %s  (%s elapsed, ETA %s)\n", cells_done_, total_cells_, line.c_str(),
                 format_duration(elapsed()).c_str(),
                 format_duration(work_done_ > 0 && total_work_ > 0
                                     ? elapsed() * std::max(total_work_ - work_done_, 0.0) / work_done_
                                     : -1.0)
                     .c_str());
    std::fflush(out_);
  }
}

void ProgressBar::finish() {
  std::lock_guard lock(mutex_);
  if (out_ == nullptr || !interactive_) return;
  draw_locked(true);
  std::fprintf(out_, "\n");
  std::fflush(out_);
}

}  // namespace ballot::evaluation
