// Where the cpu backend's own kernel (oneDNN) will not do and cpu_ref's runs instead: in
// deterministic mode (BackendOptions::deterministic) oneDNN splits some reductions among its
// threads, so their sums round differently at another thread count; under sync-BN
// (BackendOptions::batchnorm_world) a batchnorm's statistics must be summed over the ranks
// between its passes, which oneDNN's primitive cannot do. Those ops run on kernels whose every
// sum has one fixed order, and that sum over the world where asked; the rest stay on oneDNN.
// And on a CPU without VNNI instructions oneDNN's int8 convolution saturates its 16-bit pair
// sums, so an int8 convolution runs as its decomposition there (reference_routing.cpp).
#pragma once
#include <memory>

#include "backends/kernel.h"

namespace trident::cpu {

// The kernel that replaces the cpu backend's own for `node`, or nullptr where neither mode is
// on or oneDNN's kernel already does what the mode needs.
std::unique_ptr<Kernel> reference_kernel(const ir::Node& node, const ir::Graph& g, BackendContext& ctx);

}  // namespace trident::cpu
