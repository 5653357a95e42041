// How many threads the CPU backends run a step on. OpenMP threads wait for each other at every
// barrier, so on cores that other processes share one descheduled thread stalls the rest: with
// one busy process beside it on 2 cores a 2-thread step ran 4.5x slower, a 1-thread step 2x.
// The adaptive policy therefore measures, over short windows, how much CPU time other processes
// took on the cores this process may use (/proc/stat minus /proc/self/stat) and runs on the
// cores they leave free; the fixed policy always uses the maximum.
#pragma once
#include <cstdint>
#include <string>

namespace trident::runtime {

enum class ThreadPolicy { Fixed, Adaptive };

// "fixed" / "adaptive"; an Error naming the choices for anything else.
ThreadPolicy parse_thread_policy(const std::string& name);

// Process-wide, like the OpenMP thread pool it steers. Until configure() is called the policy
// is fixed at OpenMP's thread count, so a library user's results never depend on the machine's
// load; the trident command configures the adaptive policy unless told otherwise. (Only the cpu
// backend's rounding depends on the thread count; cpu_ref's results never do.)
class HostThreads {
 public:
  // max_threads 0: every core this process may run on (its affinity mask). Sets OpenMP's
  // thread count to the maximum at once.
  static void configure(int max_threads, ThreadPolicy policy);
  static int max_threads();
  // The thread count for the next step: the maximum under the fixed policy; under the adaptive
  // one the cores other processes left free over the last window (at least 1), re-measured at
  // most every kWindowSeconds. Cheap to call every step.
  static int for_next_step();

  static constexpr double kWindowSeconds = 0.1;
};

// What the adaptive policy decides from one window's measurement: `other_cores` of the
// `allowed_cores` were busy with other processes' work; `current` threads run now. Goes down
// when the free cores are half a core short of `current`, up when 0.6 of a core beyond it (a
// dead band, so a process using half a core does not make the count swing). Pure, for tests.
int adaptive_thread_count(double other_cores, int allowed_cores, int max_threads, int current);

}  // namespace trident::runtime
