// The ops this backend runs on cpu_ref's loops (no oneDNN primitive, or none worth it: loss,
// optimizer, fill, fold_batchnorm, mul, clip, concat, resize_channels): the reference loop
// behind this backend's f32-only check. The one fallback wrapper of the backend: every family
// file that registers such an op uses it.
#pragma once
#include "backends/cpu/kernels.h"
#include "backends/cpu/onednn_util.h"
#include "backends/cpu_ref/kernels.h"

namespace trident::cpu {

using RefLoopFn = void (*)(const KernelArgs&);

// A cpu_ref loop; inputs NonFloatInputs... (i32 labels) are exempt from the f32 check.
template <RefLoopFn Fn, size_t... NonFloatInputs>
class RefLoop final : public Kernel {
 public:
  RefLoop(const ir::Node& node, const ir::Graph& g) { expect_f32(node, g, {NonFloatInputs...}); }
  void run(const KernelArgs& args) override { Fn(args); }
};

}  // namespace trident::cpu
