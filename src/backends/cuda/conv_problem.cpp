// Convolution sizes from the IR, their cuDNN tensor views, and the graph descriptions of the
// forward (with epilogue or statistics), dgrad and wgrad convolutions.
#include "backends/cuda/conv_problem.h"

#include <cstdio>

#include "backends/cuda/kernels.h"
#include "ops/window.h"

namespace trident::cuda {

namespace {

std::string shape_text(const Shape& s) { return shape_str(s); }

}  // namespace

device::SmallConvShape small_conv_shape(const ConvProblem& p) {
  device::SmallConvShape s;
  s.N = p.N;
  s.H = p.H;
  s.W = p.W;
  s.C = p.C;
  s.K = p.K;
  s.R = p.R;
  s.S = p.S;
  s.P = p.P;
  s.Q = p.Q;
  s.stride_h = p.window.stride[0];
  s.stride_w = p.window.stride[1];
  s.pad_h = p.window.padding[0];
  s.pad_w = p.window.padding[1];
  return s;
}

std::string small_conv_refusal(const ConvProblem& p, device::SmallConvKernel kernel) {
  const auto t = device::elem_type(p.dtype);
  if (!t) return "it takes f16 or bf16 data, not " + std::string(dtype_name(p.dtype));
  return device::small_conv_refusal(small_conv_shape(p), *t, p.window.dilation[0], p.window.dilation[1], p.groups,
                                    kernel);
}

GraphTensor ConvProblem::input(int uid) const {
  return {uid, {N, C, H, W}, {H * W * C, 1, W * C, C}, dtype};
}

GraphTensor ConvProblem::filter(int uid) const {
  return {uid, {K, Cg, R, S}, {R * S * Cg, 1, S * Cg, Cg}, dtype};
}

GraphTensor ConvProblem::output(int uid, DType t) const {
  return {uid, {N, K, P, Q}, {P * Q * K, 1, Q * K, K}, t};
}

GraphTensor ConvProblem::per_channel(int uid, DType t) const { return {uid, {1, K, 1, 1}, {K, 1, K, K}, t}; }

GraphTensor ConvProblem::per_input_channel(int uid, DType t) const { return {uid, {1, C, 1, 1}, {C, 1, C, C}, t}; }

namespace {

// x, or relu(x·scale + shift) of it when the prologue is on: the index of the tensor the
// convolution reads.
int convolution_input(GraphDesc& d, const ConvProblem& p, const InputPrologue& prologue) {
  const int x = d.add_tensor(p.input(conv_uid::x));
  if (!prologue.on) return x;
  const int scale = d.add_tensor(p.per_input_channel(conv_uid::x_scale, prologue.affine));
  const int shift = d.add_tensor(p.per_input_channel(conv_uid::x_shift, prologue.affine));
  const int scaled = d.add_tensor(p.input(0));
  d.tensors[scaled].dtype = DType::f32;
  const int shifted = d.add_tensor(d.tensors[scaled]);
  const int activated = d.add_tensor(d.tensors[scaled]);
  d.tensors[activated].dtype = prologue.activated;
  d.add_op(GraphOpKind::mul, {x, scale}, {scaled});
  d.add_op(GraphOpKind::add, {scaled, shift}, {shifted});
  d.add_op(GraphOpKind::relu, {shifted}, {activated});
  return activated;
}

std::string prologue_text(const InputPrologue& prologue) {
  return prologue.on ? "scale+shift(" + std::string(dtype_name(prologue.affine)) + ")+relu(" +
                           std::string(dtype_name(prologue.activated)) + ")+"
                     : "";
}

}  // namespace

std::string ConvProblem::describe() const {
  return std::string(dtype_name(dtype)) + " x" + shape_text({N, H, W, C}) + " w" + shape_text({K, R, S, Cg}) +
         " y" + shape_text({N, P, Q, K}) + " stride " + std::to_string(window.stride[0]) + "," +
         std::to_string(window.stride[1]) + " pad " + std::to_string(window.padding[0]) + "," +
         std::to_string(window.padding[1]) + " dil " + std::to_string(window.dilation[0]) + "," +
         std::to_string(window.dilation[1]) + " groups " + std::to_string(groups);
}

ConvProblem conv_problem(const ir::Node& node, const Shape& x, const Shape& w, const Shape& y, DType dtype) {
  ConvProblem p;
  ops::WindowGeom geom;
  try {
    geom = ops::conv_geometry(node.attrs, x, w, y);
  } catch (const Error& e) {
    fail(node, e.what());
  }
  p.window.stride = {geom.stride.h, geom.stride.w};
  p.window.padding = {geom.pad.h, geom.pad.w};
  p.window.dilation = {geom.dil.h, geom.dil.w};
  p.groups = geom.groups;
  p.N = geom.N, p.H = geom.H, p.W = geom.W, p.C = geom.C;
  p.K = geom.K, p.R = geom.R, p.S = geom.S, p.Cg = geom.Cg;
  p.P = geom.P, p.Q = geom.Q;
  p.dtype = dtype;
  if (p.N * p.H * p.W * p.C == 0 || p.N * p.P * p.Q * p.K == 0 || p.R * p.S * p.Cg == 0)
    fail(node, "the convolution has an empty tensor (" + p.describe() + ")");
  return p;
}

std::string FpropFusion::describe() const {
  std::string s = prologue_text(prologue) + "conv_fprop";
  if (bias) s += "+bias";
  if (residual) s += "+residual";
  if (relu && relu_max > 0) {
    char clip[32];
    std::snprintf(clip, sizeof clip, "+relu(max %g)", relu_max);
    s += clip;
  } else if (relu) {
    s += "+relu";
  }
  if (genstats) s += "+genstats";
  return s;
}

GraphDesc fprop_graph(const ConvProblem& p, const FpropFusion& f) {
  GraphDesc d;
  d.purpose = f.describe() + " (" + p.describe() + ")";
  d.io = p.dtype;
  d.window = p.window;
  const int x = convolution_input(d, p, f.prologue);
  const int w = d.add_tensor(p.filter(conv_uid::w));
  // Each step writes a virtual f32 tensor, except the last, which is y.
  const int steps = 1 + (f.bias ? 1 : 0) + (f.residual ? 1 : 0) + (f.relu ? 1 : 0);
  int done = 0;
  auto next_out = [&]() {
    ++done;
    return d.add_tensor(done == steps ? p.output(conv_uid::y, p.dtype) : p.output(0, DType::f32));
  };
  int cur = next_out();
  d.add_op(GraphOpKind::conv_fprop, {x, w}, {cur});
  if (f.bias) {
    const int b = d.add_tensor(p.per_channel(conv_uid::bias, f.bias_dtype));
    const int out = next_out();
    d.add_op(GraphOpKind::add, {cur, b}, {out});
    cur = out;
  }
  if (f.residual) {
    const int r = d.add_tensor(p.output(conv_uid::residual, p.dtype));
    const int out = next_out();
    d.add_op(GraphOpKind::add, {cur, r}, {out});
    cur = out;
  }
  if (f.relu) {
    const int out = next_out();
    d.add_op(GraphOpKind::relu, {cur}, {out}, f.relu_max);
    cur = out;
  }
  if (f.genstats) {
    const int sum = d.add_tensor(p.per_channel(conv_uid::sum, DType::f32));
    const int sq_sum = d.add_tensor(p.per_channel(conv_uid::sq_sum, DType::f32));
    d.add_op(GraphOpKind::genstats, {cur}, {sum, sq_sum});
  }
  return d;
}

GraphDesc dgrad_graph(const ConvProblem& p) {
  GraphDesc d;
  d.purpose = "conv_dgrad (" + p.describe() + ")";
  d.io = p.dtype;
  d.window = p.window;
  const int dy = d.add_tensor(p.output(conv_uid::dy, p.dtype));
  const int w = d.add_tensor(p.filter(conv_uid::w));
  const int dx = d.add_tensor(p.input(conv_uid::dx));
  d.add_op(GraphOpKind::conv_dgrad, {dy, w}, {dx});
  return d;
}

GraphDesc wgrad_graph(const ConvProblem& p, const InputPrologue& prologue) {
  GraphDesc d;
  d.purpose = prologue_text(prologue) + "conv_wgrad (" + p.describe() + ")";
  d.io = p.dtype;
  d.window = p.window;
  const int x = convolution_input(d, p, prologue);
  const int dy = d.add_tensor(p.output(conv_uid::dy, p.dtype));
  const int dw = d.add_tensor(p.filter(conv_uid::dw));
  d.add_op(GraphOpKind::conv_wgrad, {x, dy}, {dw});
  return d;
}

}  // namespace trident::cuda
