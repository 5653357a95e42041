// The op registry: for every op, one entry holding its schema (input/output names),
// attribute validation + shape inference, memory aliasing, side effects, cost, and the
// graph-level backward rule used by autodiff. Backends add kernels elsewhere, keyed by name.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace trident::ir {

struct TypeInfo {
  Shape shape;
  DType dtype = DType::f32;
};

// Emits the gradient nodes of one forward node. `output_grads[i]` is the value holding
// d(loss)/d(output i), or -1 when that output receives no gradient. Returns, for each input,
// the value holding d(loss)/d(input), or -1. Rules always emit every input gradient they
// can; dead-code elimination later removes the ones nobody reads (the data input's).
using BackwardFn =
    std::function<std::vector<int>(Graph& g, const Node& n, const std::vector<int>& output_grads)>;

struct OpDef {
  std::string name;
  std::vector<std::string> inputs;   // names; a trailing "?" marks an optional input (the last ones only)
  std::vector<std::string> outputs;  // names of the outputs in their maximal form
  bool variadic = false;             // any number of inputs (the optimizer step)
  bool view = false;                 // output 0 is input 0 reinterpreted: no kernel work
  std::string summary;               // one line, for docs and `trident info --ops`

  // Traits: what the passes ask of an op, so that none keeps its own list of op names.
  // Element i of the output from element i of each input alone, and a step the `elementwise`
  // op's programs can run (ops/elementwise_program.h): fuse_elementwise chains it.
  bool elementwise = false;
  bool reduction = false;         // reads whole windows, channels or rows of its input: ends an element-wise chain
  bool reads_conv_input = false;  // inputs 0 and 1 are a convolution's NHWC input and OHWI weight (pad_channels)
  // Inputs (schema names, "b?" for an optional one) that stay f32 under mixed precision
  // (assign_precision): parameters and statistics that are not a convolution's operands.
  std::vector<std::string> f32_inputs;

  // Validates attributes and input shapes; returns output types. Throws Error sentences.
  std::function<std::vector<TypeInfo>(const Node&, const Graph&)> infer;
  // Pairs (output index, input index) whose storage is shared: views (flatten) and in-place
  // updates (running statistics, optimizer state).
  std::function<std::vector<std::pair<int, int>>(const Node&)> aliases;
  // True when the node must run even if no output is read (it updates state in place).
  std::function<bool(const Node&)> side_effects;
  // Multiply-accumulates of one execution (0 for element-wise ops).
  std::function<int64_t(const Node&, const Graph&)> macs;
  BackwardFn backward;  // empty: not differentiable (a backward op itself, or the loss seed)
  // Fused ops only: emits the unfused nodes computing the same outputs from the same inputs
  // and returns, for each output of `n`, the value that computes it. Tests compare every
  // fused kernel with this decomposition.
  std::function<std::vector<int>(Graph& g, const Node& n)> decompose;

  void check_arity(const Node& n) const;
  // True when input `i` is one of `f32_inputs`.
  bool keeps_f32(size_t i) const;
  std::string output_name(size_t i) const;
};

class OpRegistry {
 public:
  // Throws Error("unknown op 'x'") for names never registered.
  static const OpDef& get(const std::string& name);
  static bool has(const std::string& name);
  static void add(OpDef def);
  static std::vector<std::string> names();

 private:
  static std::map<std::string, OpDef>& table();
};

// Registers every built-in op once (idempotent). Called by OpRegistry::get.
void register_builtin_ops();

}  // namespace trident::ir
