// The TRIDENT_VERBOSE switch and its stderr lines (verbose.h).
#include "backends/cuda/verbose.h"

#include <cstdlib>
#include <iostream>
#include <mutex>

namespace trident::cuda {

bool verbose() {
  static const bool on = [] {
    const char* v = std::getenv("TRIDENT_VERBOSE");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

void verbose_note(const std::string& line) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::cerr << "trident cuda: " << line << "\n";
}

}  // namespace trident::cuda
