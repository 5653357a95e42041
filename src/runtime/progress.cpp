// Training progress bar (see progress.h).
// Interactive redraws are throttled to 20 per second so a fast loop does not flood the terminal;
// the non-interactive mode prints at most nine tenth-marks plus the final line per bar.
#include "runtime/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace trident {

bool stderr_is_terminal() {
  if (::isatty(STDERR_FILENO) == 0) return false;
  const char* term = std::getenv("TERM");
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

int stderr_columns() {
  winsize ws{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    const int n = std::atoi(c);
    if (n > 0) return n;
  }
  return 80;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e9) return "?:??";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[48];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  return buf;
}

ProgressBar::ProgressBar(std::string label, int64_t total, std::ostream& os, bool interactive, int columns)
    : label_(std::move(label)),
      total_(total),
      os_(os),
      interactive_(interactive),
      columns_(std::max(columns, 2)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (total < 0)
    throw Error("progress bar '" + label_ + "' needs a total of at least 0 steps, got " +
                std::to_string(total));
}

ProgressBar::~ProgressBar() {
  // Leave the terminal on a fresh line if the caller never finished the bar.
  if (interactive_ && drawn_ && !finished_) os_ << '\n' << std::flush;
}

double ProgressBar::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string ProgressBar::render(int64_t done, double elapsed, const Metrics& metrics,
                                bool final) const {
  std::string line = render_with_bar(kBarWidth, done, elapsed, metrics, final);
  if (!interactive_) return line;
  // One column short of the width: a line that fills it would wrap on some terminals.
  const size_t fits = static_cast<size_t>(columns_ - 1);
  for (int bar = kBarWidth - 1; line.size() > fits && bar >= kMinBarWidth; --bar)
    line = render_with_bar(bar, done, elapsed, metrics, final);
  if (line.size() > fits) line.resize(fits);
  return line;
}

std::string ProgressBar::render_with_bar(int bar, int64_t done, double elapsed, const Metrics& metrics,
                                         bool final) const {
  std::string line = label_;
  if (total_ > 0) {
    const int64_t d = std::clamp<int64_t>(done, 0, total_);
    const auto hashes = static_cast<int>(d * bar / total_);
    line += " [" + std::string(hashes, '#') + std::string(bar - hashes, '.') + "] ";
    line += std::to_string(d) + "/" + std::to_string(total_);
  } else {
    line += " " + std::to_string(std::max<int64_t>(done, 0));
  }
  for (const auto& [name, value] : metrics) {
    line += "  ";
    if (!name.empty()) line += name + " ";
    line += value;
  }
  if (final) {
    line += "  time " + format_duration(elapsed);
  } else if (total_ > 0 && done > 0) {
    const double remaining = elapsed * static_cast<double>(total_ - std::min(done, total_)) /
                             static_cast<double>(done);
    line += "  ETA " + format_duration(remaining);
  }
  return line;
}

void ProgressBar::draw(const std::string& line) {
  os_ << '\r' << line;
  if (line.size() < last_len_) os_ << std::string(last_len_ - line.size(), ' ');
  os_ << std::flush;
  last_len_ = line.size();
  drawn_ = true;
}

void ProgressBar::update(int64_t done, const Metrics& metrics) {
  if (finished_) return;
  done_ = total_ > 0 ? std::clamp<int64_t>(done, 0, total_) : std::max<int64_t>(done, 0);
  if (interactive_) {
    const auto now = std::chrono::steady_clock::now();
    const bool due = !drawn_ || done_ == total_ || now - last_draw_ >= std::chrono::milliseconds(50);
    if (!due) return;
    last_draw_ = now;
    draw(render(done_, elapsed_seconds(), metrics));
    return;
  }
  // The 100% line is left to finish().
  if (total_ <= 0 || done_ >= total_ || next_tenth_ > 9) return;
  const auto tenth = static_cast<int>(done_ * 10 / total_);
  if (tenth < next_tenth_) return;
  next_tenth_ = tenth + 1;
  os_ << render(done_, elapsed_seconds(), metrics) << '\n' << std::flush;
}

void ProgressBar::finish(const Metrics& metrics) {
  if (finished_) return;
  finished_ = true;
  const int64_t done = total_ > 0 ? total_ : done_;
  const std::string line = render(done, elapsed_seconds(), metrics, /*final=*/true);
  if (interactive_) {
    draw(line);
    os_ << '\n' << std::flush;
  } else {
    os_ << line << '\n' << std::flush;
  }
}

}  // namespace trident
