// The cpu backend's deterministic mode (BackendOptions::deterministic): oneDNN splits some
// reductions among its threads, so their sums round differently at another thread count. Those
// ops run on kernels whose every sum has one fixed order instead; the rest stay on oneDNN.
#pragma once
#include <memory>

#include "backends/kernel.h"

namespace trident::cpu {

// The kernel that replaces the cpu backend's own for `node` in deterministic mode, or nullptr
// where the context is not deterministic or oneDNN's kernel already gives the same bits at
// every thread count.
std::unique_ptr<Kernel> deterministic_kernel(const ir::Node& node, const ir::Graph& g, BackendContext& ctx);

}  // namespace trident::cpu
