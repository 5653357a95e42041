// Parsing, validation and output extents of sliding-window parameters (ops/window.h).
#include "ops/window.h"

#include <vector>

#include "core/checked_math.h"
#include "core/error.h"
#include "ops/op_helpers.h"

namespace trident::ops {

namespace {

// An [h, w] attribute (one integer means both); `fallback` when absent. Rejects wrong lengths
// and values below `min` (a fallback too: a pooling without a kernel).
Pair pair_attr(const ir::Attrs& a, const std::string& key, Pair fallback, int64_t min) {
  std::vector<int64_t> v = a.has(key) ? a.ints(key) : std::vector<int64_t>{fallback.h, fallback.w};
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) throw Error("attribute '" + key + "' must hold 1 or 2 integers");
  for (int64_t x : v)
    if (x < min)
      throw Error("attribute '" + key + "' must be at least " + std::to_string(min) + ", got " +
                  std::to_string(x));
  return {v[0], v[1]};
}

// Output extent of a sliding window along one axis; throws if the window does not fit. With
// `ceil`, a last partial window counts when it starts inside the input or its left padding.
int64_t extent(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil,
               const char* axis) {
  const std::string what = std::string("the ") + axis + " window";  // attributes may be huge
  const int64_t span = checked_add(checked_mul(dilation, kernel - 1, what), 1, what);
  const int64_t padded = checked_add(in, checked_mul(2, pad, what), what);
  if (padded < span)
    throw Error(what + " of " + std::to_string(span) + " does not fit an input of " +
                std::to_string(in) + " with padding " + std::to_string(pad));
  if (!ceil) return (padded - span) / stride + 1;
  int64_t out = (padded - span + stride - 1) / stride + 1;
  if ((out - 1) * stride >= in + pad) --out;
  return out;
}

// Throws unless y's extents are those the window gives for x's.
void expect_output(const WindowGeom& g) {
  const Pair out = g.output({g.H, g.W});
  if (out.h != g.P || out.w != g.Q)
    throw Error("output extent " + std::to_string(g.P) + "x" + std::to_string(g.Q) +
                " does not match the attributes, which give " + std::to_string(out.h) + "x" +
                std::to_string(out.w));
}

void expect_rank4(const Shape& s, const char* what) {
  if (s.size() != 4)
    throw Error(std::string(what) + " must have rank 4 (NHWC), got " + shape_str(s));
}

}  // namespace

Pair Window::output(Pair input) const {
  return {extent(input.h, kernel.h, stride.h, pad.h, dil.h, ceil_mode, "height"),
          extent(input.w, kernel.w, stride.w, pad.w, dil.w, ceil_mode, "width")};
}

Window conv_window(const ir::Attrs& a, Pair kernel) {
  Window win;
  win.kernel = kernel;
  win.stride = pair_attr(a, "stride", {1, 1}, 1);
  win.pad = pair_attr(a, "padding", {0, 0}, 0);
  win.dil = pair_attr(a, "dilation", {1, 1}, 1);
  win.groups = a.i("groups", 1);
  if (win.groups < 1) throw Error("attribute 'groups' must be at least 1");
  return win;
}

Window pool_window(const ir::Attrs& a) {
  Window win;
  win.kernel = pair_attr(a, "kernel", {0, 0}, 1);
  win.stride = pair_attr(a, "stride", win.kernel, 1);
  win.pad = pair_attr(a, "padding", {0, 0}, 0);
  win.count_include_pad = a.i("count_include_pad", 1) != 0;
  win.ceil_mode = a.i("ceil_mode", 0) != 0;
  if (win.pad.h * 2 > win.kernel.h || win.pad.w * 2 > win.kernel.w)
    throw Error("padding must be at most half the pooling window");
  return win;
}

ir::Attrs conv_window_attrs(const ir::Attrs& a) { return copy_attrs(a, {"stride", "padding", "dilation", "groups"}); }
ir::Attrs pool_window_attrs(const ir::Attrs& a) {
  return copy_attrs(a, {"kernel", "stride", "padding", "count_include_pad", "ceil_mode"});
}

Shape conv_output_shape(const ir::Attrs& a, const Shape& x, const Shape& w) {
  expect_rank4(x, "the convolution input");
  if (w.size() != 4) throw Error("the convolution weight must have rank 4 (OHWI), got " + shape_str(w));
  const Window win = conv_window(a, {w[1], w[2]});
  const int64_t C = x[3], K = w[0];
  if (C % win.groups != 0 || K % win.groups != 0)
    throw Error("groups=" + std::to_string(win.groups) + " must divide both input channels (" +
                std::to_string(C) + ") and output channels (" + std::to_string(K) + ")");
  if (w[3] != C / win.groups)
    throw Error("weight " + shape_str(w) + " expects " + std::to_string(w[3] * win.groups) +
                " input channels but the input " + shape_str(x) + " has " + std::to_string(C));
  const Pair out = win.output({x[1], x[2]});
  return {x[0], out.h, out.w, K};
}

Shape pool_output_shape(const ir::Attrs& a, const Shape& x) {
  expect_rank4(x, "the pooling input");
  const Pair out = pool_window(a).output({x[1], x[2]});
  return {x[0], out.h, out.w, x[3]};
}

WindowGeom conv_geometry(const ir::Attrs& a, const Shape& x, const Shape& w, const Shape& y) {
  if (x.size() != 4 || w.size() != 4 || y.size() != 4)
    throw Error("convolution tensors must be rank 4 (NHWC / OHWI), got x" + shape_str(x) + " w" +
                shape_str(w) + " y" + shape_str(y));
  WindowGeom g;
  static_cast<Window&>(g) = conv_window(a, {w[1], w[2]});
  g.N = x[0], g.H = x[1], g.W = x[2], g.C = x[3];
  g.K = w[0], g.R = w[1], g.S = w[2];
  g.P = y[1], g.Q = y[2];
  if (g.C % g.groups != 0 || g.K % g.groups != 0)
    throw Error("groups=" + std::to_string(g.groups) + " must divide both the input channels (" +
                std::to_string(g.C) + ") and the output channels (" + std::to_string(g.K) + ")");
  g.Cg = g.C / g.groups;
  g.Kg = g.K / g.groups;
  if (w[3] != g.Cg || y[0] != g.N || y[3] != g.K)
    throw Error("shapes x" + shape_str(x) + " w" + shape_str(w) + " y" + shape_str(y) +
                " do not agree");
  expect_output(g);
  return g;
}

WindowGeom pool_geometry(const ir::Attrs& a, const Shape& x, const Shape& y) {
  if (x.size() != 4 || y.size() != 4)
    throw Error("pooling tensors must be rank 4 (NHWC), got x" + shape_str(x) + " y" + shape_str(y));
  WindowGeom g;
  static_cast<Window&>(g) = pool_window(a);
  g.N = x[0], g.H = x[1], g.W = x[2], g.C = x[3];
  g.P = y[1], g.Q = y[2], g.K = y[3];
  g.R = g.kernel.h, g.S = g.kernel.w;
  g.Cg = g.Kg = g.C;
  if (y[0] != g.N || y[3] != g.C)
    throw Error("shapes x" + shape_str(x) + " y" + shape_str(y) + " do not agree");
  expect_output(g);
  return g;
}

}  // namespace trident::ops
