// The ops this backend runs on cpu_ref's loops (no oneDNN primitive, or none worth it: loss,
// optimizer, fill, the fused elementwise program, fold_batchnorm, mul, clip, concat,
// resize_channels): the reference kernel behind this backend's f32-only check, made at build
// time. One definition here serves every family file that registers such an op.
#pragma once
#include <memory>

#include "backends/cpu/kernels.h"
#include "backends/cpu/onednn_util.h"
#include "backends/cpu_ref/kernels.h"

namespace trident::onednn {

using RefLoopFn = void (*)(const KernelArgs&);

// A cpu_ref loop; inputs NonFloatInputs... (i32 labels) are exempt from the f32 check.
template <RefLoopFn Fn, size_t... NonFloatInputs>
class RefLoop final : public Kernel {
 public:
  RefLoop(const ir::Node& node, const ir::Graph& g) { expect_f32(node, g, {NonFloatInputs...}); }
  void run(const KernelArgs& args) override { Fn(args); }
};

// A cpu_ref kernel object (one with state, or one cpu_ref registers privately) behind the
// same check, made through cpu_ref's own registration.
class RefKernel final : public Kernel {
 public:
  RefKernel(const ir::Node& node, const ir::Graph& g) {
    expect_f32(node, g);
    ref_ = KernelRegistry::make("cpu_ref", node, g);
  }
  void run(const KernelArgs& args) override { ref_->run(args); }

 private:
  std::unique_ptr<Kernel> ref_;
};

}  // namespace trident::onednn
