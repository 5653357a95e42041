// quantize_int8 on an imported QDQ model (no calibration stage): the model's QuantizeLinear →
// DequantizeLinear pairs, quantize_dequantize nodes since the import, give the scales.
//
//   conv2d(quantize_dequantize(x; s, z) or a value an int8 convolution left on that grid, w, b?)
//       ⇒ conv2d_epilogue {int8_input_scale s}(x, w, b?)   where the grid needs no zero point
//   int8 conv ──► [pair] ──► [add(·, r)] ──► [relu / clip(0, m)] ──► [pair]   (each link one reader)
//       ⇒ conv2d_epilogue {…, mid_quant (the first pair, before the add), residual, relu,
//                          out_quant (the last pair; a lone first pair is the last)}
//
// In topological order, so the convolution after such a chain finds its input on the chain's
// last grid and reads it in int8 without a pass of its own; onnxruntime's quantizer leaves
// each relu as that grid (u8 from 0), which the epilogue clips to. A pair with a zero point
// that makes the grid asymmetric stays f32, a sentence in `explain`; pairs no convolution takes
// (the image's, a linear layer's) run as their own op.
#include <algorithm>
#include <optional>

#include "ops/conv_stages.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/quantize_int8_detail.h"
#include "passes/relu_bound.h"

namespace trident::passes {

namespace {

using Grid = ops::ConvStages::Grid;

bool is_pair(const ir::Node& n) { return n.op == "quantize_dequantize" && n.attrs.i("per_channel", 0) == 0; }

Grid pair_grid(const ir::Node& n) {
  return Grid{true, n.attrs.f("scale"), n.attrs.i("unsigned", 0) != 0, n.attrs.i("zero_point", 0)};
}

bool in_order(const ir::Graph& g, int id) { return order_position(g, id) < g.order().size(); }

bool is_output(const ir::Graph& g, int v) {
  return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

std::vector<int> readers(const ir::Graph& g, int v) {
  std::vector<int> r;
  for (int id : g.order())
    for (int in : g.node(id).inputs)
      if (in == v) {
        r.push_back(id);
        break;
      }
  return r;
}

// The one node reading `v` (not a graph output), or nullptr.
const ir::Node* only_reader(const ir::Graph& g, int v) {
  const std::vector<int> r = readers(g, v);
  return r.size() == 1 && !is_output(g, v) ? &g.node(r[0]) : nullptr;
}

// The grid value `v` lies on: a pair's output, or an int8 convolution's whose last stage is one.
std::optional<Grid> grid_of(const ir::Graph& g, int v) {
  const int p = g.value(v).producer;
  if (p < 0) return std::nullopt;
  const ir::Node& n = g.node(p);
  if (is_pair(n)) return pair_grid(n);
  if (n.op == "conv2d_epilogue" && ops::ConvStages::of(n).out_quant.on) return ops::ConvStages::of(n).out_quant;
  return std::nullopt;
}

// The convolution reads its input on the grid it lies on; true when it is int8 now. A pair
// left without readers leaves the order at once, so the chains after it see true reader counts.
bool read_input_grid(ir::Graph& g, PassContext& ctx, int conv) {
  ir::Node& n = g.node(conv);
  const std::optional<Grid> grid = grid_of(g, n.inputs[0]);
  if (!grid) return false;
  const std::string pattern = n.op + " in int8";
  std::string reason = int8_detail::structural_refusal(g, n);
  // s8 with zero point −128 is u8 from 0, and u8 with 128 is s8: the same grid of values.
  const bool as_unsigned = grid->is_unsigned ? grid->zero_point == 0 : grid->zero_point == -128;
  const bool as_signed = grid->is_unsigned ? grid->zero_point == 128 : grid->zero_point == 0;
  if (reason.empty() && !as_unsigned && !as_signed)
    reason = "the model quantizes its input with zero point " + std::to_string(grid->zero_point) +
             " (an asymmetric grid), which trident's int8 convolution does not read; it runs in f32 on that grid";
  if (!reason.empty()) {
    ctx.rejections.push_back({"quantize_int8", pattern, n.name, reason});
    return false;
  }
  FusionRecord rec{"quantize_int8", pattern, n.name, {}};
  const ir::Node& producer = g.node(g.value(n.inputs[0]).producer);
  if (is_pair(producer)) {
    rec.nodes.push_back(producer.name);
    const int pair = producer.id, pair_out = producer.outputs[0];
    n.inputs[0] = producer.inputs[0];
    if (readers(g, pair_out).empty() && !is_output(g, pair_out)) g.remove_from_order({pair});
  }
  rec.nodes.push_back(n.name);
  int8_detail::quantize(n, grid->scale, as_unsigned);
  ctx.fusions.push_back(rec);
  return true;
}

struct Chain {
  Grid mid, out;
  int residual = -1;
  double relu_max = -1;  // -1: no relu; 0: relu; > 0: clip(0, relu_max)
  std::vector<int> nodes;
};

// The pairs, residual add and relu after int8 convolution `conv` that its epilogue can take.
Chain trailing_chain(const ir::Graph& g, const ir::Node& conv) {
  const ops::ConvStages s = ops::ConvStages::of(conv);
  Chain c;
  int v = conv.outputs[0];
  const ir::Node* next = only_reader(g, v);
  auto take = [&](const ir::Node& n) {
    c.nodes.push_back(n.id);
    v = n.outputs[0];
    next = only_reader(g, v);
  };
  std::optional<Grid> first;
  if (next && is_pair(*next) && !s.out_quant.on) {
    first = pair_grid(*next);
    take(*next);
  }
  const bool open = s.residual == ops::ConvStages::Residual::none && !s.relu && !s.out_quant.on;
  if (open && next && next->op == "add") {
    const int r = next->inputs[0] == v ? next->inputs[1] : next->inputs[0];
    if (r != v && g.value(r).shape == g.value(v).shape && g.value(r).dtype == g.value(v).dtype) {
      if (first) c.mid = *first, first.reset();
      c.residual = r;
      take(*next);
      if (next && (next->op == "relu" || relu_bound(*next) > 0)) {
        c.relu_max = next->op == "relu" ? 0 : relu_bound(*next);
        take(*next);
      }
      if (next && is_pair(*next)) {
        c.out = pair_grid(*next);
        take(*next);
      }
    }
  }
  if (first) c.out = *first;
  if (!c.nodes.empty() && is_output(g, g.node(c.nodes.back()).outputs[0])) return {};
  return c;
}

void fuse_trailing_chain(ir::Graph& g, PassContext& ctx, int conv_id) {
  const Chain c = trailing_chain(g, g.node(conv_id));
  if (c.nodes.empty()) return;
  const ir::Node conv = g.node(conv_id);
  ir::Attrs a = conv.attrs;
  std::vector<int> in = conv.inputs;
  if (c.residual >= 0) {
    a.set("residual", int64_t{1});
    in.push_back(c.residual);
  }
  if (c.relu_max >= 0) a.set("relu", int64_t{1});
  if (c.relu_max > 0) a.set("relu_max", c.relu_max);
  if (c.mid.on) ops::ConvStages::set_grid(a, "mid_quant", c.mid);
  if (c.out.on) ops::ConvStages::set_grid(a, "out_quant", c.out);
  const int tail = g.node(c.nodes.back()).outputs[0];
  const int out = g.add_node1("conv2d_epilogue", in, a, conv.name + ".grids");
  g.replace_uses(tail, out);
  FusionRecord rec{"quantize_int8", "conv-grids in int8", conv.name + ".grids", {conv.name}};
  for (int id : c.nodes) rec.nodes.push_back(g.node(id).name);
  std::vector<int> gone = c.nodes;
  gone.push_back(conv_id);
  replace_nodes(g, {g.value(out).producer}, c.nodes.back(), gone);
  ctx.fusions.push_back(rec);
}

}  // namespace

void quantize_int8_from_pairs(ir::Graph& g, PassContext& ctx) {
  for (int id : std::vector<int>(g.order())) {
    if (!in_order(g, id) || !int8_detail::is_convolution(g.node(id))) continue;
    if (read_input_grid(g, ctx, id)) fuse_trailing_chain(g, ctx, id);
  }
}

}  // namespace trident::passes
