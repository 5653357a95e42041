// Shared plumbing of the oneDNN "cpu" backend: NHWC/OHWI → oneDNN memory descriptors, node
// geometry, cache-key signatures, and PrimitiveKernel, a Kernel built as a fixed list of
// primitive steps whose tensor arguments are bound to the run's views by set_data_handle.
#pragma once
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "backends/cpu/cpu_context.h"
#include "backends/cpu/onednn_context.h"
#include "backends/kernel.h"
#include "core/error.h"

namespace trident::cpu {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;

// ---- errors and checks done once, when a kernel is built ----

// Throws Error("the cpu backend cannot run node 'n' (op o): <what>").
[[noreturn]] void fail(const ir::Node& node, const std::string& what);
// Throws unless every input and output of the node is f32, except the inputs listed in
// `non_float_inputs` (e.g. i32 labels), which are left to the kernel.
void expect_f32(const ir::Node& node, const ir::Graph& g,
                std::initializer_list<size_t> non_float_inputs = {});
const Shape& in_shape(const ir::Node& node, const ir::Graph& g, size_t i);
const Shape& out_shape(const ir::Node& node, const ir::Graph& g, size_t i);

// ---- memory descriptors (f32 only) ----

// NHWC activation [N,H,W,C] as oneDNN dims {N,C,H,W} with tag nhwc.
memory::desc nhwc_md(const Shape& nhwc);
// A dense row-major tensor of rank 1 or 2 (tags a / ab).
memory::desc plain_md(const Shape& shape);
// Any tensor seen as a flat vector of its elements (element-wise ops).
memory::desc flat_md(int64_t numel);
// OHWI conv weights [K,R,S,C/g]: {K,C/g,R,S} tag ohwi, or {g,K/g,C/g,R,S} tag gohwi.
memory::desc conv_weights_md(const Shape& ohwi, int64_t groups);
// The same dims with format `any`, for a primitive to choose its preferred layout.
memory::desc any_like(const memory::desc& md);

// Attributes with a user-managed scratchpad (every primitive of this backend uses them).
dnnl::primitive_attr user_scratchpad_attr();

// ---- sliding-window geometry, in oneDNN terms ----

// A node's window (ops/window.h, which reads and checks the attributes) as oneDNN takes it.
struct DnnlWindow {
  Dims strides, kernel, dilates, pad_l, pad_r;  // dilates are oneDNN's (dilation − 1)
  bool count_include_pad = true;                // average pooling
  int64_t groups = 1;                           // convolution
};
// The window of a convolution x * w → y or a pooling x → y, checked against the shapes.
DnnlWindow conv_window(const ir::Node& node, const Shape& x, const Shape& w, const Shape& y);
DnnlWindow pool_window(const ir::Node& node, const Shape& x, const Shape& y);

// ---- cache-key signatures ----

class Signature {
 public:
  explicit Signature(std::string_view kind) : text_(kind) { text_ += "/f32"; }
  Signature& add(std::string_view name, int64_t v);
  Signature& add(std::string_view name, double v);
  Signature& add(std::string_view name, const std::vector<int64_t>& v);
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

// A reorder between two layouts of the same tensor, cached under `key`.
CachedPrimitive reorder_primitive(const std::string& key, const memory::desc& from,
                                  const memory::desc& to);

// ---- kernels made of primitive steps ----

// Which of the run's views a primitive argument reads or writes.
struct ViewRef {
  bool output = false;
  size_t index = 0;
};
inline ViewRef in(size_t i) { return {false, i}; }
inline ViewRef out(size_t i) { return {true, i}; }
inline const TensorView& resolve(const KernelArgs& args, ViewRef r) {
  return r.output ? args.out[r.index] : args.in[r.index];
}

// A place in the executable's shared scratch arena (cpu_context.h), addressed at run time:
// for intermediates that live only while their kernel runs.
struct ScratchRef {
  std::shared_ptr<ScratchArena> arena;
  size_t offset = 0;
};

// A primitive operand: one of the run's views, a kernel-owned buffer (a reordered weight...)
// or a scratch region (an intermediate of a fused kernel). Lets the step builders serve
// single and fused ops.
struct Operand {
  Operand(ViewRef r) : ref(r) {}  // NOLINT: implicit on purpose
  Operand(memory m) : mem(std::move(m)) {}  // NOLINT
  Operand(ScratchRef s) : scratch(std::move(s)) {}  // NOLINT
  ViewRef ref;
  memory mem;  // used when non-empty
  std::optional<ScratchRef> scratch;
};

// One primitive execution with its argument map. View arguments get their data pointer at
// run time; owned arguments (scratchpad, workspace, reordered weights) were allocated once.
class Step {
 public:
  explicit Step(dnnl::primitive prim) : prim_(std::move(prim)) {}
  Step& view(int arg, const memory::desc& md, ViewRef ref);
  Step& owned(int arg, const memory& mem);
  Step& scratch(int arg, const memory::desc& md, const ScratchRef& ref);
  Step& bind(int arg, const memory::desc& md, const Operand& op) {
    if (op.scratch) return scratch(arg, md, *op.scratch);
    return op.mem ? owned(arg, op.mem) : view(arg, md, op.ref);
  }
  void execute(const KernelArgs& args, dnnl::stream& stream);
  // Marks a step that only transforms weights (a weight reorder): with constant weights it
  // runs in prepare(), not in every run().
  Step& weight_prep() {
    weight_prep_ = true;
    return *this;
  }
  bool is_weight_prep() const { return weight_prep_; }

 private:
  bool weight_prep_ = false;
  dnnl::primitive prim_;
  std::unordered_map<int, memory> args_;
  std::vector<std::pair<memory, ViewRef>> views_;
  std::vector<std::pair<memory, ScratchRef>> scratch_;
};

class PrimitiveKernel : public Kernel {
 public:
  PrimitiveKernel(const ir::Node& node, const ir::Graph& g);
  void run(const KernelArgs& args) override { execute(args); }
  void prepare(const KernelArgs& args) override;
  std::string implementation() const override { return implementation_; }

  // Kernel building (public so the step builders of kernels.h can compose fused kernels):
  // appends a step running `p`, with its scratchpad (if any) allocated now, or placed in the
  // executable's scratch arena at `scratchpad_at` (it lives only while the step runs).
  Step& add_step(const CachedPrimitive& p, const std::optional<ScratchRef>& scratchpad_at = std::nullopt);
  // A kernel-owned buffer for `md`, allocated now and kept for the kernel's lifetime.
  memory owned(const memory::desc& md) const;
  // What `trident explain` says of this kernel where it chose between algorithms.
  void set_implementation(std::string how) { implementation_ = std::move(how); }

 protected:
  // Checks the views against the shapes the kernel was built for, runs every step, waits.
  void execute(const KernelArgs& args);
  void check_views(const KernelArgs& args) const;

 private:
  std::string node_name_, op_, implementation_;
  std::vector<Shape> in_shapes_, out_shapes_;
  std::deque<Step> steps_;
};

}  // namespace trident::cpu
