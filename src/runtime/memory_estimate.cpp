// The memory estimate of a plan: every buffer as Executable::compile allocates it (at least
// one alignment unit each), and on a device backend the host copies of inputs, parameters and
// state (what host_view, export_weights and the training loop touch).
#include "runtime/memory_estimate.h"

#include <algorithm>

#include "core/memory_budget.h"

namespace trident::runtime {

MemoryEstimate estimate_memory(const plan::MemoryPlan& plan, bool on_device) {
  using plan::Buffer;
  static constexpr std::pair<Buffer, const char*> kNames[] = {
      {Buffer::Arena, "arena"},          {Buffer::Params, "parameters"}, {Buffer::Grads, "gradients"},
      {Buffer::State, "state"},          {Buffer::Inputs, "inputs"},     {Buffer::Constants, "constants"}};
  MemoryEstimate e;
  for (const auto& [buffer, name] : kNames) {
    const uint64_t bytes = std::max<uint64_t>(plan.bytes(buffer), plan::kAlignment);
    e.backend_bytes += bytes;
    if (plan.bytes(buffer) >= (uint64_t{1} << 20))
      e.breakdown += (e.breakdown.empty() ? "" : ", ") + std::string(name) + " " + format_bytes(bytes);
  }
  e.host_bytes = e.backend_bytes;
  if (on_device) {
    e.host_bytes = plan.bytes(Buffer::Inputs) + plan.bytes(Buffer::Params) + plan.bytes(Buffer::State);
    e.breakdown += (e.breakdown.empty() ? "" : "; ") + std::string("host copies ") + format_bytes(e.host_bytes);
  }
  return e;
}

}  // namespace trident::runtime
