// Training progress bar: one '\r'-redrawn line on a terminal, a few plain lines elsewhere.
// The stream, the interactive flag and the elapsed time (render) are injectable so the output
// is testable; the caller formats its own metrics, the bar only adds timing (elapsed / ETA).
#pragma once
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace trident {

// True when stderr is a terminal (and TERM is not "dumb"): the default for ProgressBar.
bool stderr_is_terminal();
// The width of the terminal on stderr in columns (TIOCGWINSZ, else $COLUMNS, else 80).
int stderr_columns();

// Formats seconds as M:SS, or H:MM:SS from one hour; negative or non-finite gives "?:??".
std::string format_duration(double seconds);

class ProgressBar {
 public:
  // (name, value) pairs shown in order as "name value"; an empty name shows the value alone
  // (e.g. {"", "1234 img/s"}).
  using Metrics = std::vector<std::pair<std::string, std::string>>;

  // label: e.g. "epoch 1/3"; total: number of steps (0 when unknown: no bar, no ETA).
  // Interactive: update() redraws one line with '\r'. Not interactive (CI, pipes): update()
  // prints a line only when another tenth of the total is reached, and finish() the last line.
  // Interactive lines are kept shorter than `columns`, so a redraw never wraps onto a new line:
  // the bar narrows first, then the end of the line is cut.
  ProgressBar(std::string label, int64_t total, std::ostream& os = std::cerr,
              bool interactive = stderr_is_terminal(), int columns = stderr_columns());
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Reports `done` steps completed (clamped to [0, total]).
  void update(int64_t done, const Metrics& metrics = {});
  // Marks the work complete (done = total), prints the final line with the total time and ends
  // it with a newline; later calls do nothing.
  void finish(const Metrics& metrics = {});

  // The line for `done` steps after `elapsed_seconds`, with an ETA, or the total time when
  // `final`, e.g. "epoch 1/3 [#########.........] 312/468  loss 0.4213  ETA 0:12".
  std::string render(int64_t done, double elapsed_seconds, const Metrics& metrics,
                     bool final = false) const;

  static constexpr int kBarWidth = 20;
  static constexpr int kMinBarWidth = 5;

 private:
  double elapsed_seconds() const;
  void draw(const std::string& line);
  std::string render_with_bar(int bar, int64_t done, double elapsed, const Metrics& metrics, bool final) const;

  std::string label_;
  int64_t total_;
  std::ostream& os_;
  bool interactive_;
  int columns_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  bool drawn_ = false;         // interactive: a line is on screen without its '\n'
  size_t last_len_ = 0;        // interactive: length of that line, to blank leftovers
  int next_tenth_ = 1;         // non-interactive: next tenth of the total that prints a line
  int64_t done_ = 0;
  bool finished_ = false;
};

}  // namespace trident
