// Test support: runs the trident binary (TRIDENT_BINARY, defined for every test target) with
// arguments through the shell and returns its exit code and output.
#pragma once
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace trident::test_support {

struct RunResult {
  int code = -1;  // exit status; 128 + signal number when killed
  std::string output;
};

// With `merge`, stderr is captured along with stdout; otherwise it is discarded.
inline RunResult run_trident(const std::string& args, bool merge = true) {
  RunResult r;
  const std::string cmd = std::string(TRIDENT_BINARY) + " " + args + (merge ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace trident::test_support
