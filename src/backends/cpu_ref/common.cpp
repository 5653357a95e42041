// Error sentences and window geometry shared by every reference kernel.
// Geometry is recomputed from the views and checked against the attributes, so a planner
// bug shows up as a clear message rather than an out-of-bounds write.
#include "backends/cpu_ref/common.h"

namespace trident::cpu_ref {

namespace {
std::string node_desc(const KernelArgs& args) {
  return "node '" + args.node.name + "' (op " + args.node.op + ")";
}
}  // namespace

void unsupported_dtype(const KernelArgs& args, DType dtype) {
  throw Error("the cpu_ref backend cannot run " + node_desc(args) + " on dtype " +
              std::string(dtype_name(dtype)) + "; it supports f32 and f64");
}

void expect_arity(const KernelArgs& args, size_t n_in, size_t n_out) {
  expect_arity(args, n_in, n_in, n_out, n_out);
}

namespace {
std::string count_range(size_t lo, size_t hi) {
  return std::to_string(lo) + (hi != lo ? " to " + std::to_string(hi) : "");
}
}  // namespace

void expect_arity(const KernelArgs& args, size_t min_in, size_t max_in, size_t min_out,
                  size_t max_out) {
  if (args.in.size() < min_in || args.in.size() > max_in || args.out.size() < min_out ||
      args.out.size() > max_out)
    throw Error(node_desc(args) + " was given " + std::to_string(args.in.size()) +
                " inputs and " + std::to_string(args.out.size()) + " outputs; cpu_ref expects " +
                count_range(min_in, max_in) + " inputs and " + count_range(min_out, max_out) +
                " outputs");
}

void expect_dtype(const KernelArgs& args, const TensorView& view, DType dtype, const char* what) {
  if (view.dtype != dtype)
    throw Error(node_desc(args) + ": " + what + " has dtype " + std::string(dtype_name(view.dtype)) +
                " but " + std::string(dtype_name(dtype)) + " was expected");
}

void expect_rank(const KernelArgs& args, const TensorView& view, size_t rank, const char* what) {
  if (view.shape.size() != rank)
    throw Error(node_desc(args) + ": " + what + " has shape " + shape_str(view.shape) +
                " but a rank-" + std::to_string(rank) + " tensor was expected");
}

Pair pair_attr(const KernelArgs& args, const std::string& key, Pair fallback) {
  if (!args.node.attrs.has(key)) return fallback;
  const auto& v = args.node.attrs.ints(key);
  if (v.size() != 2)
    throw Error(node_desc(args) + ": attribute '" + key + "' must be an [h, w] pair");
  return {v[0], v[1]};
}

namespace {
int64_t out_extent(int64_t in, int64_t pad, int64_t dil, int64_t k, int64_t stride) {
  return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

void check_output(const KernelArgs& args, const WindowGeom& g) {
  if (g.stride.h < 1 || g.stride.w < 1 || g.dil.h < 1 || g.dil.w < 1 || g.pad.h < 0 || g.pad.w < 0)
    throw Error(node_desc(args) + ": stride and dilation must be >= 1 and padding >= 0");
  int64_t p = out_extent(g.H, g.pad.h, g.dil.h, g.R, g.stride.h);
  int64_t q = out_extent(g.W, g.pad.w, g.dil.w, g.S, g.stride.w);
  if (p != g.P || q != g.Q)
    throw Error(node_desc(args) + ": output extent " + std::to_string(g.P) + "x" +
                std::to_string(g.Q) + " does not match the attributes, which give " +
                std::to_string(p) + "x" + std::to_string(q));
}
}  // namespace

WindowGeom conv_geom(const KernelArgs& args, const Shape& x, const Shape& w, const Shape& y) {
  if (x.size() != 4 || w.size() != 4 || y.size() != 4)
    throw Error(node_desc(args) + ": convolution tensors must be rank 4 (NHWC / OHWI)");
  WindowGeom g;
  g.N = x[0], g.H = x[1], g.W = x[2], g.C = x[3];
  g.K = w[0], g.R = w[1], g.S = w[2];
  g.P = y[1], g.Q = y[2];
  g.stride = pair_attr(args, "stride", {1, 1});
  g.pad = pair_attr(args, "padding", {0, 0});
  g.dil = pair_attr(args, "dilation", {1, 1});
  g.groups = args.node.attrs.i("groups", 1);
  if (g.groups < 1 || g.C % g.groups != 0 || g.K % g.groups != 0)
    throw Error(node_desc(args) + ": groups=" + std::to_string(g.groups) +
                " must divide both the input channels (" + std::to_string(g.C) +
                ") and the output channels (" + std::to_string(g.K) + ")");
  g.Cg = g.C / g.groups;
  g.Kg = g.K / g.groups;
  if (w[3] != g.Cg || y[0] != g.N || y[3] != g.K)
    throw Error(node_desc(args) + ": shapes x" + shape_str(x) + " w" + shape_str(w) + " y" +
                shape_str(y) + " do not agree");
  check_output(args, g);
  return g;
}

WindowGeom pool_geom(const KernelArgs& args, const Shape& x, const Shape& y) {
  if (x.size() != 4 || y.size() != 4)
    throw Error(node_desc(args) + ": pooling tensors must be rank 4 (NHWC)");
  WindowGeom g;
  g.N = x[0], g.H = x[1], g.W = x[2], g.C = x[3];
  g.P = y[1], g.Q = y[2], g.K = y[3];
  Pair k = pair_attr(args, "kernel", {0, 0});
  g.R = k.h, g.S = k.w;
  g.stride = pair_attr(args, "stride", k);
  g.pad = pair_attr(args, "padding", {0, 0});
  g.Cg = g.Kg = g.C;
  if (g.R < 1 || g.S < 1)
    throw Error(node_desc(args) + ": attribute 'kernel' must be a positive [h, w] pair");
  if (y[0] != g.N || y[3] != g.C)
    throw Error(node_desc(args) + ": shapes x" + shape_str(x) + " y" + shape_str(y) +
                " do not agree");
  check_output(args, g);
  return g;
}

}  // namespace trident::cpu_ref
