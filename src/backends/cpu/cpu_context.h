// Per-executable state of the oneDNN "cpu" backend: one scratch region shared by every kernel
// of the executable for intermediates that live only while one kernel runs (kernels of one
// executable run one after another, so they can all start at the same address).
#pragma once
#include <cstddef>
#include <memory>

#include "backends/backend_context.h"

namespace trident::cpu {

// Storage that kernels reserve while they are built and address while they run; it is
// allocated at first use with the largest reservation (zero-filled, 64-byte aligned).
class ScratchArena {
 public:
  void reserve(size_t bytes);
  std::byte* data();
  size_t reserved() const { return reserved_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { free_host(p); }
  };
  size_t reserved_ = 0, allocated_ = 0;
  std::unique_ptr<std::byte, Free> memory_;
};

class CpuContext final : public BackendContext {
 public:
  bool kernels_depend_on_threads() const override { return true; }
  // Kernels hold the arena by shared ownership: they may outlive a context made only to build them.
  const std::shared_ptr<ScratchArena>& scratch() const { return scratch_; }
  size_t workspace_bytes() const override { return scratch_->reserved(); }

 private:
  std::shared_ptr<ScratchArena> scratch_ = std::make_shared<ScratchArena>();
};

// `ctx` as the cpu backend's context; a default one for a context of another kind.
const CpuContext& cpu_context(const BackendContext& ctx);

}  // namespace trident::cpu
