// allreduce_mean and allreduce_wait on the "cpu" backend: the host collective kernel cpu_ref registers
// (cpu_ref/collective.cpp); oneDNN has nothing to add to an MPI call over host memory.
#include "backends/cpu/kernels.h"
#include "backends/cpu_ref/kernels.h"

namespace trident::cpu {

void register_collective_kernels() {
  KernelRegistry::add(kBackend, "allreduce_mean", cpu_ref::make_allreduce_mean);
  KernelRegistry::add(kBackend, "allreduce_wait", cpu_ref::make_allreduce_wait);
}

}  // namespace trident::cpu
