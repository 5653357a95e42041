// What an executable will allocate, computed from its memory plan before anything is: the
// buffers (arena, parameters, gradients, state, inputs, constants) on the backend and, for a
// device backend, the host copies of the tensors the host reads and writes. Kernel workspaces
// are known only once kernels are built; Executable::compile claims them then, separately.
#pragma once
#include <cstdint>
#include <string>

#include "plan/memory_plan.h"

namespace trident::runtime {

struct MemoryEstimate {
  uint64_t backend_bytes = 0;  // host memory on host backends, device memory on a GPU
  uint64_t host_bytes = 0;     // host memory, the backend's own included on host backends
  std::string breakdown;       // "arena 20.1 GiB, parameters 97.5 MiB, ..."
};

MemoryEstimate estimate_memory(const plan::MemoryPlan& plan, bool on_device);

}  // namespace trident::runtime
