// Descriptor, geometry and signature helpers plus the step runner behind every primitive
// kernel of the "cpu" backend. Everything that can fail is checked at kernel-build time;
// run() only compares shapes, sets data handles and executes.
#include "backends/cpu/onednn_util.h"

#include <cstdio>

#include "ops/window.h"

namespace trident::cpu {

void fail(const ir::Node& node, const std::string& what) {
  throw Error("the cpu backend cannot run node '" + node.name + "' (op " + node.op + "): " + what);
}

const Shape& in_shape(const ir::Node& node, const ir::Graph& g, size_t i) {
  if (i >= node.inputs.size()) fail(node, "input " + std::to_string(i) + " is missing");
  return g.value(node.inputs[i]).shape;
}

const Shape& out_shape(const ir::Node& node, const ir::Graph& g, size_t i) {
  if (i >= node.outputs.size()) fail(node, "output " + std::to_string(i) + " is missing");
  return g.value(node.outputs[i]).shape;
}

void expect_f32(const ir::Node& node, const ir::Graph& g,
                std::initializer_list<size_t> non_float_inputs) {
  auto check = [&](int id) {
    const DType t = g.value(id).dtype;
    if (t != DType::f32)
      fail(node, "value '" + g.value(id).name + "' has dtype " + std::string(dtype_name(t)) +
                     " but this backend supports f32 only (use cpu_ref for f64)");
  };
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    bool skip = false;
    for (size_t k : non_float_inputs) skip = skip || k == i;
    if (!skip) check(node.inputs[i]);
  }
  for (int id : node.outputs) check(id);
}

memory::desc nhwc_md(const Shape& s) {
  TRIDENT_CHECK(s.size() == 4, "an NHWC tensor must have rank 4");
  return memory::desc({s[0], s[3], s[1], s[2]}, memory::data_type::f32, Tag::nhwc);
}

memory::desc plain_md(const Shape& s) {
  TRIDENT_CHECK(s.size() == 1 || s.size() == 2, "a plain tensor must have rank 1 or 2");
  return memory::desc(Dims(s.begin(), s.end()), memory::data_type::f32,
                      s.size() == 1 ? Tag::a : Tag::ab);
}

memory::desc flat_md(int64_t numel) {
  return memory::desc({numel}, memory::data_type::f32, Tag::a);
}

memory::desc conv_weights_md(const Shape& w, int64_t groups) {
  TRIDENT_CHECK(w.size() == 4, "conv weights must have rank 4");
  if (groups == 1) return memory::desc({w[0], w[3], w[1], w[2]}, memory::data_type::f32, Tag::ohwi);
  return memory::desc({groups, w[0] / groups, w[3], w[1], w[2]}, memory::data_type::f32, Tag::gohwi);
}

memory::desc any_like(const memory::desc& md) {
  return memory::desc(md.dims(), md.data_type(), Tag::any);
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {
DnnlWindow dnnl_window(const ops::WindowGeom& g) {
  DnnlWindow win;
  win.strides = {g.stride.h, g.stride.w};
  win.kernel = {g.R, g.S};
  win.dilates = {g.dil.h - 1, g.dil.w - 1};
  win.pad_l = win.pad_r = {g.pad.h, g.pad.w};
  if (g.ceil_mode)  // the overhanging last window: oneDNN takes it as extra padding on the right
    win.pad_r = {(g.P - 1) * g.stride.h + g.R - g.H - g.pad.h, (g.Q - 1) * g.stride.w + g.S - g.W - g.pad.w};
  win.count_include_pad = g.count_include_pad;
  win.groups = g.groups;
  return win;
}
}  // namespace

DnnlWindow conv_window(const ir::Node& node, const Shape& x, const Shape& w, const Shape& y) {
  try {
    return dnnl_window(ops::conv_geometry(node.attrs, x, w, y));
  } catch (const Error& e) {
    fail(node, e.what());
  }
}

DnnlWindow pool_window(const ir::Node& node, const Shape& x, const Shape& y) {
  try {
    return dnnl_window(ops::pool_geometry(node.attrs, x, y));
  } catch (const Error& e) {
    fail(node, e.what());
  }
}

Signature& Signature::add(std::string_view name, int64_t v) {
  text_ += ' ';
  text_ += name;
  text_ += '=';
  text_ += std::to_string(v);
  return *this;
}

Signature& Signature::add(std::string_view name, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  text_ += ' ';
  text_ += name;
  text_ += '=';
  text_ += buf;
  return *this;
}

Signature& Signature::add(std::string_view name, const std::vector<int64_t>& v) {
  text_ += ' ';
  text_ += name;
  text_ += "=[";
  for (size_t i = 0; i < v.size(); ++i) text_ += (i ? "," : "") + std::to_string(v[i]);
  text_ += ']';
  return *this;
}

CachedPrimitive reorder_primitive(const std::string& key, const memory::desc& from,
                                  const memory::desc& to) {
  OnednnContext& ctx = OnednnContext::instance();
  return ctx.get(key, [&] {
    return dnnl::reorder::primitive_desc(ctx.engine(), from, ctx.engine(), to,
                                         user_scratchpad_attr());
  });
}

Step& Step::view(int arg, const memory::desc& md, ViewRef ref) {
  memory mem(md, OnednnContext::instance().engine(), DNNL_MEMORY_NONE);
  args_[arg] = mem;
  views_.emplace_back(mem, ref);
  return *this;
}

Step& Step::owned(int arg, const memory& mem) {
  args_[arg] = mem;
  return *this;
}

Step& Step::scratch(int arg, const memory::desc& md, const ScratchRef& ref) {
  ref.arena->reserve(ref.offset + md.get_size());
  memory mem(md, OnednnContext::instance().engine(), DNNL_MEMORY_NONE);
  args_[arg] = mem;
  scratch_.emplace_back(mem, ref);
  return *this;
}

void Step::execute(const KernelArgs& args, dnnl::stream& stream) {
  for (auto& [mem, ref] : views_)
    mem.set_data_handle(ref.output ? args.out[ref.index].data : args.in[ref.index].data);
  for (auto& [mem, ref] : scratch_) mem.set_data_handle(ref.arena->data() + ref.offset);
  prim_.execute(stream, args_);
}

PrimitiveKernel::PrimitiveKernel(const ir::Node& node, const ir::Graph& g)
    : node_name_(node.name), op_(node.op) {
  for (int id : node.inputs) in_shapes_.push_back(g.value(id).shape);
  for (int id : node.outputs) out_shapes_.push_back(g.value(id).shape);
}

Step& PrimitiveKernel::add_step(const CachedPrimitive& p, const std::optional<ScratchRef>& scratchpad_at) {
  Step& step = steps_.emplace_back(p.prim);
  const memory::desc scratch = p.pd.scratchpad_desc();
  if (scratch.get_size() > 0) {
    if (scratchpad_at)
      step.scratch(DNNL_ARG_SCRATCHPAD, scratch, *scratchpad_at);
    else
      step.owned(DNNL_ARG_SCRATCHPAD, owned(scratch));
  }
  return step;
}

memory PrimitiveKernel::owned(const memory::desc& md) const {
  return memory(md, OnednnContext::instance().engine());
}

void PrimitiveKernel::check_views(const KernelArgs& args) const {
  auto mismatch = [&](const char* what, size_t i, const TensorView& v, const Shape& want) {
    throw Error("the cpu backend kernel of node '" + node_name_ + "' (op " + op_ + ") got " +
                what + " " + std::to_string(i) + " as " + std::string(dtype_name(v.dtype)) +
                shape_str(v.shape) + " but was built for f32" + shape_str(want));
  };
  if (args.in.size() != in_shapes_.size() || args.out.size() != out_shapes_.size())
    throw Error("the cpu backend kernel of node '" + node_name_ + "' (op " + op_ + ") got " +
                std::to_string(args.in.size()) + " inputs and " + std::to_string(args.out.size()) +
                " outputs but was built for " + std::to_string(in_shapes_.size()) + " and " +
                std::to_string(out_shapes_.size()));
  for (size_t i = 0; i < in_shapes_.size(); ++i)
    if (args.in[i].shape != in_shapes_[i] || args.in[i].dtype != DType::f32)
      mismatch("input", i, args.in[i], in_shapes_[i]);
  for (size_t i = 0; i < out_shapes_.size(); ++i)
    if (args.out[i].shape != out_shapes_[i] || args.out[i].dtype != DType::f32)
      mismatch("output", i, args.out[i], out_shapes_[i]);
}

void PrimitiveKernel::execute(const KernelArgs& args) {
  check_views(args);
  dnnl::stream& stream = OnednnContext::instance().stream();
  try {
    for (Step& step : steps_)
      if (!(constant_weights_ && step.is_weight_prep())) step.execute(args, stream);
    stream.wait();
  } catch (const dnnl::error& e) {
    throw Error("the cpu backend kernel of node '" + node_name_ + "' (op " + op_ +
                ") failed in oneDNN: " + e.what());
  }
}

void PrimitiveKernel::prepare(const KernelArgs& args) {
  if (!constant_weights_) return;
  check_views(args);
  dnnl::stream& stream = OnednnContext::instance().stream();
  try {
    for (Step& step : steps_)
      if (step.is_weight_prep()) step.execute(args, stream);
    stream.wait();
  } catch (const dnnl::error& e) {
    throw Error("the cpu backend kernel of node '" + node_name_ + "' (op " + op_ +
                ") failed in oneDNN while preparing weights: " + e.what());
  }
}

}  // namespace trident::cpu
