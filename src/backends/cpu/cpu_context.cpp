// The cpu backend's per-executable context and its shared scratch arena.
#include "backends/cpu/cpu_context.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace trident::onednn {

void ScratchArena::reserve(size_t bytes) {
  if (bytes > reserved_) reserved_ = bytes;
}

std::byte* ScratchArena::data() {
  if (allocated_ < reserved_) {
    const size_t bytes = (reserved_ + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    memory_ = {static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); }};
    allocated_ = reserved_;
  }
  return memory_.get();
}

const CpuContext& cpu_context(const BackendContext& ctx) {
  static const CpuContext defaults;
  const auto* cpu = dynamic_cast<const CpuContext*>(&ctx);
  return cpu ? *cpu : defaults;
}

}  // namespace trident::onednn
