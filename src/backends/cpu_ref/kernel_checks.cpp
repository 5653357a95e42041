// Error sentences, dtype dispatch and window geometry (ops/window.h) shared by every reference
// kernel.
// Geometry is recomputed from the views and checked against the attributes, so a planner
// bug shows up as a clear message rather than an out-of-bounds write.
#include "backends/cpu_ref/kernel_checks.h"

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

WindowGeom conv_geom(const KernelArgs& args, const Shape& x, const Shape& w, const Shape& y) {
  try {
    return ops::conv_geometry(args.node.attrs, x, w, y);
  } catch (const Error& e) {
    throw Error(node_desc(args) + ": " + e.what());
  }
}

WindowGeom pool_geom(const KernelArgs& args, const Shape& x, const Shape& y) {
  try {
    return ops::pool_geometry(args.node.attrs, x, y);
  } catch (const Error& e) {
    throw Error(node_desc(args) + ": " + e.what());
  }
}

}  // namespace trident::cpu_ref
