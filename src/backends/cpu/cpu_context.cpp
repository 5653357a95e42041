// The cpu backend's per-executable context and its shared scratch arena.
#include "backends/cpu/cpu_context.h"

namespace trident::cpu {

void ScratchArena::reserve(size_t bytes) {
  if (bytes > reserved_) reserved_ = bytes;
}

std::byte* ScratchArena::data() {
  if (allocated_ < reserved_) {
    memory_.reset(static_cast<std::byte*>(allocate_host(reserved_)));
    allocated_ = reserved_;
  }
  return memory_.get();
}

const CpuContext& cpu_context(const BackendContext& ctx) {
  static const CpuContext defaults;
  const auto* cpu = dynamic_cast<const CpuContext*>(&ctx);
  return cpu ? *cpu : defaults;
}

}  // namespace trident::cpu
