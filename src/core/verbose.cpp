// The TRIDENT_VERBOSE switch and its stderr lines (verbose.h).
#include "core/verbose.h"

#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>

namespace trident {
namespace {
const long long kProcessStart = now_ns();
}  // namespace

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double elapsed_ms(long long start_ns) { return static_cast<double>(now_ns() - start_ns) / 1e6; }

std::string ms_text(double ms) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << ms << " ms";
  return s.str();
}

bool verbose() {
  static const bool on = [] {
    const char* v = std::getenv("TRIDENT_VERBOSE");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

void verbose_note(const char* who, const std::string& line) {
  std::ostringstream s;
  s << "trident " << who << " [+" << std::fixed << std::setprecision(1) << elapsed_ms(kProcessStart)
    << " ms]: " << line << "\n";
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::cerr << s.str();
}

}  // namespace trident
