// Construction-time checks shared by the cuda backend's hand-written kernel classes: node
// arity, the storage dtype of a value (f32, f16 or bf16, else a sentence naming the node), and
// the graph values behind a node's inputs and outputs. Host code, beside the kernels that use it.
#pragma once
#include <string>

#include "backends/cuda/device/launch.h"
#include "backends/cuda/kernels.h"

namespace trident::cuda {

inline const ir::Value& input_value(const ir::Node& node, const ir::Graph& g, size_t i) {
  if (i >= node.inputs.size()) fail(node, "input " + std::to_string(i) + " is missing");
  return g.value(node.inputs[i]);
}

inline const ir::Value& output_value(const ir::Node& node, const ir::Graph& g, size_t i) {
  if (i >= node.outputs.size()) fail(node, "output " + std::to_string(i) + " is missing");
  return g.value(node.outputs[i]);
}

inline void expect_arity(const ir::Node& node, size_t min_in, size_t max_in, size_t min_out, size_t max_out) {
  const size_t in = node.inputs.size(), out = node.outputs.size();
  if (in < min_in || in > max_in || out < min_out || out > max_out)
    fail(node, "has " + std::to_string(in) + " inputs and " + std::to_string(out) + " outputs, but expects " +
                   std::to_string(min_in) + (max_in != min_in ? "-" + std::to_string(max_in) : "") + " inputs and " +
                   std::to_string(min_out) + (max_out != min_out ? "-" + std::to_string(max_out) : "") + " outputs");
}

// The storage type of `v`, or an Error saying that the GPU kernels take f32, f16 or bf16.
inline device::ElemType elem_of(const ir::Node& node, const ir::Value& v, const char* what) {
  const auto t = device::elem_type(v.dtype);
  if (!t)
    fail(node, std::string(what) + " '" + v.name + "' is " + std::string(dtype_name(v.dtype)) +
                   ", but the cuda backend computes in f32, f16 or bf16: convert the model (f64 runs on cpu_ref only)");
  return *t;
}

// Throws unless `v` has dtype `want` (the op requires its operands to agree).
inline void expect_dtype(const ir::Node& node, const ir::Value& v, DType want, const char* what) {
  if (v.dtype != want)
    fail(node, std::string(what) + " '" + v.name + "' is " + std::string(dtype_name(v.dtype)) + " but must be " +
                   std::string(dtype_name(want)) + " like the node's first input");
}

inline void expect_shape(const ir::Node& node, const ir::Value& v, const Shape& want, const char* what) {
  if (v.shape != want)
    fail(node, std::string(what) + " '" + v.name + "' has shape " + shape_str(v.shape) + " but " + shape_str(want) +
                   " was expected");
}

// The storage type of a per-channel tensor (batchnorm parameters and statistics), checked to
// hold C values.
inline device::ElemType channel_type(const ir::Node& node, const ir::Value& v, int64_t C, const char* what) {
  expect_shape(node, v, Shape{C}, what);
  return elem_of(node, v, what);
}

// A kernel that moves one tensor's values as raw bits into one output (pad2d, channel_slice,
// resize_channels, channel_shuffle): one input and one output of one dtype the GPU stores.
struct MovedValues {
  const ir::Value& x;
  const ir::Value& y;
  size_t element_bytes;
};
inline MovedValues moved_values(const ir::Node& node, const ir::Graph& g) {
  expect_arity(node, 1, 1, 1, 1);
  const ir::Value &x = input_value(node, g, 0), &y = output_value(node, g, 0);
  elem_of(node, x, "the input");
  expect_dtype(node, y, x.dtype, "the output");
  return {x, y, dtype_size(x.dtype)};
}

// The rows of a tensor resized along its last axis ([rows, from] → [rows, to]: channel_slice,
// resize_channels), checked to differ in nothing else.
struct LastAxisRows {
  int64_t rows = 0, from = 0, to = 0;
};
inline LastAxisRows last_axis_rows(const ir::Node& node, const MovedValues& v) {
  if (v.x.shape.empty() || v.x.shape.size() != v.y.shape.size())
    fail(node, "input and output must have the same rank (at least one axis)");
  LastAxisRows r;
  r.from = v.x.shape.back();
  r.to = v.y.shape.back();
  r.rows = r.to > 0 ? numel(v.y.shape) / r.to : 0;
  if (r.from <= 0 || numel(v.x.shape) != r.rows * r.from)
    fail(node, "input " + shape_str(v.x.shape) + " and output " + shape_str(v.y.shape) +
                   " differ in more than the last axis");
  return r;
}

}  // namespace trident::cuda
