// trident::set_cpu_threads (trident/network.h): the library's door to the process-wide thread
// policy the trident command configures from --threads and --thread-policy.
#include <string>

#include "core/error.h"
#include "runtime/host_threads.h"
#include "trident/network.h"

namespace trident {

void set_cpu_threads(int max_threads, bool adaptive) {
  if (max_threads < 0 || max_threads > 1024)
    throw Error("set_cpu_threads: max_threads must be from 0 (every core) to 1024, not " + std::to_string(max_threads));
  runtime::HostThreads::configure(max_threads, adaptive ? runtime::ThreadPolicy::Adaptive : runtime::ThreadPolicy::Fixed);
}

}  // namespace trident
