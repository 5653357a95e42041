// Shared plumbing of the reference CPU backend: dtype dispatch, arity checks and the
// geometry of convolution/pooling windows (ops/window.h) checked against the view shapes.
// Kernels never look at the graph: everything comes from the node's attributes and the views.
#pragma once
#include <cstdint>
#include <string>

#include "backends/kernel.h"
#include "core/error.h"
#include "ops/window.h"

namespace trident::cpu_ref {

// Throws an Error naming the node, its op and the dtype it was given.
[[noreturn]] void unsupported_dtype(const KernelArgs& args, DType dtype);

// Throws an Error unless the node has exactly `n_in` inputs and `n_out` outputs.
void expect_arity(const KernelArgs& args, size_t n_in, size_t n_out);
// Same, with ranges (an optional trailing input or output).
void expect_arity(const KernelArgs& args, size_t min_in, size_t max_in, size_t min_out,
                  size_t max_out);

// Throws an Error unless `view` has dtype `dtype`; `what` names the tensor in the message.
void expect_dtype(const KernelArgs& args, const TensorView& view, DType dtype, const char* what);
// Throws an Error unless `view` has rank `rank`.
void expect_rank(const KernelArgs& args, const TensorView& view, size_t rank, const char* what);

// Calls `fn(T{})` with T = float or double according to `dtype`.
template <class Fn>
void dispatch_float(const KernelArgs& args, DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: fn(float{}); return;
    case DType::f64: fn(double{}); return;
    default: unsupported_dtype(args, dtype);
  }
}

// An entry point's whole body: checks that the node has `n_in` inputs and one output, then
// calls `fn(T{})` with T the dtype of input 0 (float or double).
template <class Fn>
void run_float(const KernelArgs& args, size_t n_in, Fn&& fn) {
  expect_arity(args, n_in, 1);
  dispatch_float(args, args.in[0].dtype, fn);
}

// Sizes of a 2-D sliding-window op over NHWC tensors (ops/window.h).
using ops::WindowGeom;

// Convolution geometry from x shape, weight shape [K,R,S,C/g] and y shape; checks that they
// agree with the node's stride/padding/dilation/groups and throws an Error naming the node
// otherwise, so a planner bug shows up as a clear message rather than an out-of-bounds write.
WindowGeom conv_geom(const KernelArgs& args, const Shape& x, const Shape& w, const Shape& y);
// Pooling geometry from x and y shapes and the node's kernel/stride/padding.
WindowGeom pool_geom(const KernelArgs& args, const Shape& x, const Shape& y);

}  // namespace trident::cpu_ref
