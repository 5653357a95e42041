// Training, after autodiff: cross-layer fusion of a cbr's batchnorm apply into the next
// convolution. Where the only readers of a cbr's output y are the next fused convolution (as
// its input), that convolution's weight gradient, and the cbr's own backward (as its relu
// mask), y need not exist: the cbr stops at its batch statistics (conv_bn_stats, which hands
// on the per-channel affine of ops/bn_apply.cpp), the next convolution applies
// relu(x·scale + shift) while it reads the raw convolution output (attribute prologue; on the
// GPU cuDNN's scale → bias → relu → conv_fprop → genstats graph), its weight gradient
// recomputes the same input, and the backward recomputes the relu mask from the convolution
// output it reads anyway.
//
//   cbr_i ──► y ──► cbr_j (x)                conv_bn_stats_i ──► conv_out, affine ──► cbr_j (prologue)
//             ├──► wgrad_j (x)          ⇒                            └──────────────► wgrad_j (prologue)
//             └──► bn_relu_backward_i                                └──────────────► bn_relu_backward_i
//
// Neither y nor its mask is written or kept for the backward: the memory of one activation
// per fused pair. A max pooling that keeps its window index (ResNet's stem, the end of every
// VGG stage) is such a reader too: it pools relu(x·scale + shift) while reading its windows,
// and its backward reads the index, not its input, so y is neither written nor read. Every
// cbr whose y has another reader (an average pooling, a shortcut, a plain convolution, a
// graph output) keeps it and is recorded with the reason.
//
// A block end with a projection shortcut (the dual pattern) is the same idea on the residual:
//
//   conv_s ──► batchnorm2d ──► cbar (residual)     ⇒   conv_bn_stats_s ──► conv_out, affine ──► cbar (residual_affine)
//
// the shortcut's batchnorm output is never written: the cbar's apply adds conv_out·scale +
// shift itself. Its backward (batchnorm2d_backward) reads conv_out and the saved statistics
// as before.
#include <algorithm>

#include "ops/cbr_operands.h"
#include "ops/conv_stages.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/value_uses.h"

namespace trident::passes {

namespace {

constexpr const char* kPattern = "bn-apply-prologue";

bool is_fused_forward(const std::string& op) { return op == "cbr" || op == "cbar" || op == "conv_bn_stats"; }

// A training max pooling that keeps a window index (save_maxpool_index, which runs first): its
// backward does not read its input, so the input may be read through the affine instead.
bool pools_by_index(const ir::Node& n) { return n.op == "maxpool2d" && n.attrs.i("window_index", 0) != 0; }

struct Readers {
  int consumer = -1;               // the fused forward reading y as its x
  std::vector<int> wgrads;         // weight gradients reading y as their x
  std::vector<int> mask_readers;   // backward ops reading y (or the packed mask) as their mask
};

std::string describe(const ir::Graph& g, int node) { return "'" + g.node(node).name + "' (" + g.node(node).op + ")"; }

// Empty when cbr `id` may hand its affine to its reader, else the reason.
std::string classify(const ir::Graph& g, const ValueUses& uses,
                     const ir::Node& cbr, Readers& r) {
  const int y = cbr.outputs[ops::cbr_out::y];
  const int mask = cbr.outputs.size() > ops::cbr_out::relu_mask ? cbr.outputs[ops::cbr_out::relu_mask] : -1;
  if (uses.is_output(y)) return "its output '" + g.value(y).name + "' is a graph output";
  if (mask >= 0 && uses.is_output(mask)) return "its relu mask is a graph output";
  for (int u : uses.readers(y)) {
    const ir::Node& n = g.node(u);
    const bool only_at = std::count(n.inputs.begin(), n.inputs.end(), y) == 1 && n.inputs[0] == y;  // as input 0
    if ((is_fused_forward(n.op) || pools_by_index(n)) && only_at && !ops::has_prologue(n)) {
      if (r.consumer >= 0) return "its output is the input of two convolutions or poolings";
      r.consumer = u;
    } else if (n.op == "conv2d_backward_weight" && only_at && n.inputs.size() == 2) {
      r.wgrads.push_back(u);
    } else if (n.op == "batchnorm_relu_backward" && only_at) {
      r.mask_readers.push_back(u);
    } else {
      return "its output is also read by " + describe(g, u);
    }
  }
  if (mask >= 0)
    for (int u : uses.readers(mask)) {
      const ir::Node& n = g.node(u);
      if (n.op != "batchnorm_relu_backward" || n.inputs[0] != mask) return "its relu mask is also read by " + describe(g, u);
      r.mask_readers.push_back(u);
    }
  if (r.consumer < 0) return "its output feeds no fused convolution or indexed max pooling";
  return "";
}

std::string stats_node_name(const std::string& cbr_name) {
  const std::string suffix = ".cbr";
  const bool ends = cbr_name.size() > suffix.size() && cbr_name.compare(cbr_name.size() - suffix.size(), suffix.size(), suffix) == 0;
  return (ends ? cbr_name.substr(0, cbr_name.size() - suffix.size()) : cbr_name) + ".conv_bn_stats";
}

// Gives node `id` (a fused forward, a max pooling or a weight gradient reading y as input 0)
// the raw convolution output and its affine.
void read_through_prologue(ir::Graph& g, int id, int conv_out, int affine) {
  ir::Node& n = g.node(id);
  n.inputs[0] = conv_out;
  n.inputs.push_back(affine);
  g.set_attr_and_grow(id, "prologue", int64_t{1});
}

constexpr const char* kDualPattern = "shortcut-bn";

// Empty when the shortcut batchnorm feeding cbar `block` as its residual may be applied by
// the cbar, else the reason; `bn` and `conv` are set when the shape of the pattern is there.
std::string shortcut_refusal(const ir::Graph& g, const ValueUses& uses, const ir::Node& block, int& bn, int& conv) {
  const ops::CbrOperands o = ops::CbrOperands::of(block);
  const int residual = block.inputs[o.residual];
  bn = g.value(residual).producer;
  if (bn < 0 || g.node(bn).op != "batchnorm2d") return "the residual is not a batchnorm's output";
  const ir::Node& b = g.node(bn);
  if (!b.attrs.i("training", 1)) return "the shortcut's batchnorm is in inference mode";
  conv = g.value(b.inputs[0]).producer;
  if (conv < 0 || g.node(conv).op != "conv2d") return "the shortcut's batchnorm does not follow a convolution";
  if (o.residual_affine >= 0) return "the block end already applies its residual's batchnorm";
  if (uses.only_reader(residual) < 0 ||
      std::count(block.inputs.begin(), block.inputs.end(), residual) != 1)
    return "the shortcut's batchnorm output has another reader";
  const int conv_out = b.inputs[0];
  if (uses.is_output(conv_out)) return "the shortcut's convolution output is a graph output";
  for (int u : uses.readers(conv_out))
    if (u != bn && !(g.node(u).op == "batchnorm2d_backward" && g.node(u).inputs[0] == conv_out))
      return "the shortcut's convolution output is also read by " + describe(g, u);
  return "";
}

void apply_shortcut_batchnorms(ir::Graph& g, PassContext& ctx) {
  for (int id : std::vector<int>(g.order())) {
    if (g.node(id).op != "cbar") continue;
    const ValueUses uses(g);
    int bn_id = -1, conv_id = -1;
    const std::string reason = shortcut_refusal(g, uses, g.node(id), bn_id, conv_id);
    if (bn_id < 0 || conv_id < 0 || (reason.rfind("the residual is not", 0) == 0)) continue;  // no shortcut batchnorm
    if (!reason.empty()) {
      ctx.rejections.push_back({"defer_bn_apply", kDualPattern, g.node(id).name, reason});
      continue;
    }
    const ir::Node conv = g.node(conv_id), bn = g.node(bn_id);
    const ops::CbrParts parts = ops::cbr_parts(conv, bn);
    const std::vector<int> outs = g.add_node("conv_bn_stats", parts.inputs, parts.attrs, conv.name + ".conv_bn_stats");
    g.replace_uses(conv.outputs[0], outs[ops::cbr_out::conv_out]);
    for (size_t i = 1; i < bn.outputs.size(); ++i) g.replace_uses(bn.outputs[i], outs[i + 1]);
    ir::Node& block = g.node(id);
    block.inputs[ops::CbrOperands::of(block).residual] = outs[ops::cbr_out::conv_out];
    block.inputs.push_back(outs[ops::cbr_out::affine]);
    g.set_attr_and_grow(id, "residual_affine", int64_t{1});
    replace_nodes(g, {g.value(outs[0]).producer}, bn_id, {conv_id, bn_id});
    ctx.fusions.push_back({"defer_bn_apply", kDualPattern, g.node(id).name, {conv.name, bn.name, g.node(id).name}});
  }
}

}  // namespace

// Where the backend's convolutions do not run the prologue inside them in this dtype (on the
// GPU only cuDNN's f16 engines do), the apply kernel would run twice (forward and again for
// the weight gradient), which buys memory with speed: then only where asked for
// (bn_apply_prologue = 1).
std::string prologue_refusal(const CompileOptions& o) {
  if (o.bn_apply_prologue > 0 || o.traits.fuses_prologue_in(o.precision)) return "";
  return o.traits.fused_prologue_limit + "; in " + std::string(dtype_name(o.precision)) +
         " the apply would run twice (forced with bn_apply_prologue = 1)";
}

void defer_bn_apply(ir::Graph& g, PassContext& ctx) {
  const std::string not_here = prologue_refusal(ctx.options);
  for (int id : std::vector<int>(g.order())) {
    if (g.node(id).op != "cbr") continue;
    if (!not_here.empty()) {
      ctx.rejections.push_back({"defer_bn_apply", kPattern, g.node(id).name, not_here});
      continue;
    }
    if (ops::ConvStages::of(g.node(id)).clipped) {
      ctx.rejections.push_back({"defer_bn_apply", kPattern, g.node(id).name,
                                "its relu is clipped (ReLU6), which the next convolution's prologue does not apply"});
      continue;
    }
    const ValueUses uses(g);
    const ir::Node cbr = g.node(id);
    Readers r;
    const std::string reason = classify(g, uses, cbr, r);
    if (!reason.empty()) {
      ctx.rejections.push_back({"defer_bn_apply", kPattern, cbr.name, reason});
      continue;
    }
    ir::Attrs attrs = cbr.attrs;
    attrs.set("relu_mask", int64_t{0});
    // A pooling applies the affine in trident's own kernel, in f32: nothing needs it rounded to
    // the f16 values cuDNN's prologue graphs read, so the pooled values equal the cbr's output.
    if (pools_by_index(g.node(r.consumer))) attrs.set("exact_affine", int64_t{1});
    const std::vector<int> outs = g.add_node("conv_bn_stats", cbr.inputs, attrs, stats_node_name(cbr.name));
    for (size_t i = ops::cbr_out::conv_out; i <= ops::cbr_out::running_var; ++i) g.replace_uses(cbr.outputs[i], outs[i]);
    replace_nodes(g, {g.value(outs[0]).producer}, id, {id});
    const int conv_out = outs[ops::cbr_out::conv_out], affine = outs[ops::cbr_out::affine];
    read_through_prologue(g, r.consumer, conv_out, affine);
    for (int w : r.wgrads) read_through_prologue(g, w, conv_out, affine);
    for (int b : r.mask_readers) g.node(b).inputs[0] = affine;
    // A mask pack_relu_mask gave this cbr no longer exists: neither does its record.
    std::erase_if(ctx.fusions, [&](const FusionRecord& f) { return f.pass == "pack_relu_mask" && f.fused_node == cbr.name; });
    ctx.fusions.push_back({"defer_bn_apply", kPattern, g.node(r.consumer).name, {cbr.name, g.node(r.consumer).name}});
  }
  apply_shortcut_batchnorms(g, ctx);
}

}  // namespace trident::passes
