// The host thread governor (see host_threads.h). Linux accounting: /proc/stat's per-CPU lines
// give every process's busy time on each CPU, /proc/self/stat this process's; their difference
// over a window, on the CPUs of the affinity mask, is what others took. Fewer threads are taken
// at once; more only when two windows in a row agree, so one quiet moment does not flip back.
#include "runtime/host_threads.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace trident::runtime {

ThreadPolicy parse_thread_policy(const std::string& name) {
  if (name == "fixed") return ThreadPolicy::Fixed;
  if (name == "adaptive") return ThreadPolicy::Adaptive;
  throw Error("unknown thread policy '" + name + "' (choices: adaptive, fixed)");
}

int adaptive_thread_count(double other_cores, int allowed_cores, int max_threads, int current) {
  const double free = allowed_cores - std::max(other_cores, 0.0);
  int next = current;
  if (free < current - 0.5) next = static_cast<int>(std::floor(free + 0.5));
  else if (free > current + 0.6) next = static_cast<int>(std::floor(free + 0.4));
  return std::clamp(next, 1, std::max(max_threads, 1));
}

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty())
    for (int c = 0; c < std::max(1, omp_get_num_procs()); ++c) cpus.push_back(c);
  return cpus;
}

// Busy clock ticks (user, nice, system, irq, softirq, steal) summed over `cpus`; -1 if unreadable.
int64_t busy_ticks(const std::vector<int>& cpus) {
  std::ifstream f("/proc/stat");
  if (!f) return -1;
  std::string line;
  int64_t busy = 0;
  size_t found = 0;
  while (std::getline(f, line)) {
    if (line.compare(0, 3, "cpu") != 0) break;  // the cpu lines come first
    if (line.size() < 4 || line[3] < '0' || line[3] > '9') continue;  // the aggregate line
    std::istringstream in(line.substr(3));
    int id = -1;
    int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    in >> id >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    if (!in && !in.eof()) continue;
    if (std::find(cpus.begin(), cpus.end(), id) == cpus.end()) continue;
    busy += user + nice + system + irq + softirq + steal;
    ++found;
  }
  return found ? busy : -1;
}

// This process's user + system clock ticks; -1 if unreadable.
int64_t own_ticks() {
  std::ifstream f("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return -1;
  std::istringstream in(text.substr(close + 1));
  std::string field;
  int64_t utime = 0, stime = 0;
  // Fields after the name: state(3) ... utime(14), stime(15).
  for (int k = 3; k <= 13; ++k) in >> field;
  in >> utime >> stime;
  return in ? utime + stime : -1;
}

struct Governor {
  std::mutex mu;
  int max_threads = 0;
  ThreadPolicy policy = ThreadPolicy::Fixed;  // library default: results do not depend on the load
  std::vector<int> cpus;
  int current = 0;
  int pending = 0;  // a decision waiting for its confirming window
  bool have_sample = false, unavailable = false;
  Clock::time_point at;
  int64_t busy = 0, own = 0;

  void ensure_configured() {
    if (max_threads > 0) return;
    cpus = allowed_cpus();
    max_threads = std::min<int>(omp_get_max_threads(), static_cast<int>(cpus.size()));
    current = max_threads;
  }

  // Takes a sample; returns false when /proc cannot be read (the count then stays fixed).
  bool sample(int64_t& b, int64_t& o) {
    b = busy_ticks(cpus);
    o = own_ticks();
    if (b < 0 || o < 0) unavailable = true;
    return !unavailable;
  }

  int step() {
    std::lock_guard<std::mutex> lock(mu);
    ensure_configured();
    if (policy == ThreadPolicy::Fixed || unavailable || max_threads <= 1) return max_threads;
    const Clock::time_point now = Clock::now();
    if (!have_sample) {
      if (sample(busy, own)) {
        at = now;
        have_sample = true;
      }
      return current;
    }
    const double seconds = std::chrono::duration<double>(now - at).count();
    if (seconds < HostThreads::kWindowSeconds) return current;
    int64_t b = 0, o = 0;
    if (!sample(b, o)) return current = max_threads;
    const double ticks_per_cpu = seconds * static_cast<double>(sysconf(_SC_CLK_TCK));
    const double other = static_cast<double>((b - busy) - (o - own)) / ticks_per_cpu;
    busy = b;
    own = o;
    at = now;
    const int next = adaptive_thread_count(other, static_cast<int>(cpus.size()), max_threads, current);
    // Fewer threads at once (a thread that loses its core stalls the others at every barrier),
    // more only when the next window agrees.
    if (next == current) {
      pending = 0;
    } else if (next < current || next == pending) {
      current = next;
      pending = 0;
    } else {
      pending = next;
    }
    return current;
  }
};

Governor& governor() {
  static Governor g;
  return g;
}

}  // namespace

void HostThreads::configure(int max_threads, ThreadPolicy policy) {
  Governor& g = governor();
  std::lock_guard<std::mutex> lock(g.mu);
  g.cpus = allowed_cpus();
  const int cores = static_cast<int>(g.cpus.size());
  g.max_threads = max_threads > 0 ? max_threads : cores;
  g.policy = policy;
  g.current = g.max_threads;
  g.pending = 0;
  g.unavailable = false;
  // The first window starts now: what other processes do while the model compiles and the
  // data loads decides the first step's thread count.
  g.have_sample = g.sample(g.busy, g.own);
  g.at = Clock::now();
  omp_set_num_threads(g.max_threads);
}

int HostThreads::max_threads() {
  Governor& g = governor();
  std::lock_guard<std::mutex> lock(g.mu);
  g.ensure_configured();
  return g.max_threads;
}

int HostThreads::for_next_step() { return governor().step(); }

}  // namespace trident::runtime
