// The cuda backend's pooling family: maxpool2d, avgpool2d, global_avgpool and their backward
// ops. The window geometry is read from the node and the graph's shapes once, when the kernel
// is built; run() launches one kernel on the context's stream.
#include <cstdint>
#include <memory>

#include "backends/cuda/device/pool.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/pool_geometry.h"
#include "core/window_index.h"
#include "ops/window.h"

namespace trident::cuda {

using device::PoolGeometry;

PoolGeometry pool_geometry(const ir::Node& node, const Shape& x, const Shape& y) {
  ops::WindowGeom w;
  try {
    w = ops::pool_geometry(node.attrs, x, y);
  } catch (const Error& e) {
    fail(node, e.what());
  }
  PoolGeometry g;
  g.N = w.N, g.H = w.H, g.W = w.W, g.C = w.C, g.P = w.P, g.Q = w.Q;
  g.R = w.R, g.S = w.S, g.stride_h = w.stride.h, g.stride_w = w.stride.w, g.pad_h = w.pad.h, g.pad_w = w.pad.w;
  g.count_include_pad = w.count_include_pad;
  return g;
}

namespace {

using device::ElemType;

enum class Pool { max, avg };

// The window index a max pooling writes or its backward reads: i32 words holding one byte per
// pooled element (core/window_index.h).
void expect_window_index(const ir::Node& node, const ir::Value& index, const Shape& pooled) {
  if (index.dtype != DType::i32 || index.shape != window_index_shape(numel(pooled)))
    fail(node, "the window index must be i32 " + shape_str(window_index_shape(numel(pooled))));
}

// maxpool2d / avgpool2d: x → y (and maxpool2d's window index where attribute window_index asks;
// with attribute prologue, maxpool2d pools relu(x·scale + shift) from its second input, the
// affine defer_bn_apply hands it, so the activated tensor is never written).
template <Pool Kind>
class PoolForward final : public Kernel {
 public:
  PoolForward(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 1, Kind == Pool::max ? 2 : 1, 1, Kind == Pool::max ? 2 : 1);
    const ir::Value &x = input_value(node, g, 0), &y = output_value(node, g, 0);
    type_ = elem_of(node, x, "input");
    expect_dtype(node, y, x.dtype, "output");
    geom_ = pool_geometry(node, x.shape, y.shape);
    index_ = node.outputs.size() > 1;
    if (index_) expect_window_index(node, output_value(node, g, 1), y.shape);
    prologue_ = node.inputs.size() > 1;
    if (prologue_) {
      const ir::Value& affine = input_value(node, g, 1);
      if (affine.dtype != DType::f32 || affine.shape != Shape{2, x.shape[3]})
        fail(node, "the prologue's affine must be f32 [2," + std::to_string(x.shape[3]) + "]");
    }
  }

  void run(const KernelArgs& a) override {
    if constexpr (Kind == Pool::max)
      device::launch_maxpool_forward(type_, geom_, a.in[0].data,
                                     prologue_ ? static_cast<const float*>(a.in[1].data) : nullptr, a.out[0].data,
                                     index_ ? a.out[1].data : nullptr, ctx_.stream());
    else device::launch_avgpool_forward(type_, geom_, a.in[0].data, a.out[0].data, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
  PoolGeometry geom_;
  bool index_ = false, prologue_ = false;
};

// maxpool2d_index_backward: window index, dy → dx, gathering without reading x.
class MaxPoolIndexBackward final : public Kernel {
 public:
  MaxPoolIndexBackward(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 2, 2, 1, 1);
    const ir::Value &dy = input_value(node, g, 1), &dx = output_value(node, g, 0);
    type_ = elem_of(node, dy, "gradient");
    expect_dtype(node, dx, dy.dtype, "gradient");
    expect_window_index(node, input_value(node, g, 0), dy.shape);
    geom_ = pool_geometry(node, dx.shape, dy.shape);
  }

  void run(const KernelArgs& a) override {
    device::launch_maxpool_index_backward(type_, geom_, a.in[0].data, a.in[1].data, a.out[0].data, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
  PoolGeometry geom_;
};

// maxpool2d_backward: x, dy → dx. Each window's index is found once, from x, into workspace
// scratch, then every dx element gathers from the windows whose index names it.
class MaxPoolBackward final : public Kernel {
 public:
  MaxPoolBackward(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 2, 2, 1, 1);
    const ir::Value &x = input_value(node, g, 0), &dy = input_value(node, g, 1), &dx = output_value(node, g, 0);
    type_ = elem_of(node, x, "input");
    expect_dtype(node, dy, x.dtype, "gradient");
    expect_dtype(node, dx, x.dtype, "gradient");
    expect_shape(node, dx, x.shape, "gradient");
    geom_ = pool_geometry(node, x.shape, dy.shape);
    if (geom_.R * geom_.S >= 0xFFFF) fail(node, "max pooling windows of 65535 cells or more are not supported");
    ctx_.reserve_workspace(0, static_cast<size_t>(device::maxpool_backward_scratch_bytes(geom_)));
  }

  void run(const KernelArgs& a) override {
    device::launch_maxpool_backward(type_, geom_, a.in[0].data, a.in[1].data, a.out[0].data, ctx_.workspace(0),
                                    ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
  PoolGeometry geom_;
};

// avgpool2d_backward: dy → dx of the forward input's shape.
class AvgPoolBackward final : public Kernel {
 public:
  AvgPoolBackward(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 1, 1, 1, 1);
    const ir::Value &dy = input_value(node, g, 0), &dx = output_value(node, g, 0);
    type_ = elem_of(node, dy, "gradient");
    expect_dtype(node, dx, dy.dtype, "gradient");
    geom_ = pool_geometry(node, dx.shape, dy.shape);
  }

  void run(const KernelArgs& a) override {
    device::launch_avgpool_backward(type_, geom_, a.in[0].data, a.out[0].data, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
  PoolGeometry geom_;
};

// global_avgpool [N,H,W,C] → [N,1,1,C], and its backward (the same pair of shapes, swapped).
template <bool Backward>
class GlobalAvgPool final : public Kernel {
 public:
  GlobalAvgPool(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 1, 1, 1, 1);
    const ir::Value &in = input_value(node, g, 0), &out = output_value(node, g, 0);
    const ir::Value& big = Backward ? out : in;
    const ir::Value& pooled = Backward ? in : out;
    type_ = elem_of(node, in, "input");
    expect_dtype(node, out, in.dtype, "output");
    if (big.shape.size() != 4) fail(node, "the spatial tensor must be rank 4 (NHWC)");
    expect_shape(node, pooled, Shape{big.shape[0], 1, 1, big.shape[3]}, "pooled tensor");
    N_ = big.shape[0], HW_ = big.shape[1] * big.shape[2], C_ = big.shape[3];
    if (HW_ == 0 && N_ * C_ > 0) fail(node, "the input has no spatial positions to average");
  }

  void run(const KernelArgs& a) override {
    if constexpr (Backward)
      device::launch_global_avgpool_backward(type_, N_, HW_, C_, a.in[0].data, a.out[0].data, ctx_.stream());
    else
      device::launch_global_avgpool_forward(type_, N_, HW_, C_, a.in[0].data, a.out[0].data, ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  ElemType type_ = ElemType::f32;
  int64_t N_ = 0, HW_ = 0, C_ = 0;
};

}  // namespace

void register_pool_kernels() {
  add_kernel<PoolForward<Pool::max>>("maxpool2d");
  add_kernel<MaxPoolBackward>("maxpool2d_backward");
  add_kernel<MaxPoolIndexBackward>("maxpool2d_index_backward");
  add_kernel<PoolForward<Pool::avg>>("avgpool2d");
  add_kernel<AvgPoolBackward>("avgpool2d_backward");
  add_kernel<GlobalAvgPool<false>>("global_avgpool");
  add_kernel<GlobalAvgPool<true>>("global_avgpool_backward");
}

}  // namespace trident::cuda
