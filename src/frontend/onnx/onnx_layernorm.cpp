// ConvNeXt's ops as PyTorch's two exporters write them. Its blocks permute NCHW to channels-last
// ([N,H,W,C], Transpose(0,2,3,1)), normalise the channels (LayerNormalization, axis -1), apply
// per-pixel linears (MatMul by [C,K] + Add of a bias) with GELU between, and permute back
// (Transpose(0,3,1,2)). trident's activations are NHWC already, so a channels-last view is the
// same tensor read with another axis order: it is remembered by name (channels_last_), and only
// the readers below accept it — layernorm over the last axis, a MatMul as a 1×1 convolution, the
// bias or residual Add, GELU, and the Transpose back.
//
// The TorchScript exporter (opset < 17 for LayerNormalization, < 20 for Gelu) writes both as
// small graphs; find_composites() recognises them before conversion and each becomes one node:
//   GELU:       Div(x, √2) → Erf → Add(·, 1) → Mul(x, ·) → Mul(·, 0.5)   (or Mul(x, 1/√2) first)
//   LayerNorm:  ReduceMean(x, -1) → Sub(x, ·) → Pow(·, 2) → ReduceMean(·, -1) → Add(·, eps)
//               → Sqrt → Div(d, ·) → Mul(·, γ) → Add(·, β)
// Every intermediate of a pattern must have exactly the readers the pattern gives it; anything
// else is converted node by node (and refused there with its reason).
//
// PyTorch's in-place dropout (MobileNet v3's head) arrives from the dynamo exporter as
//   RandomUniformLike → Less(·, 1−p) → Cast → Div(·, 1−p) → Mul(x, ·)
// (with optimize=False: CastLike for the Cast, and 1−p through a CastLike to the draw's type)
// and becomes one dropout of probability p (the identity in an inference import); drawn in the
// shape [N,1,1,1] it is torchvision's stochastic depth (EfficientNet, ConvNeXt), a per-sample one.
//
// The dynamo exporter also writes the batch's average pool as ReduceMean → Reshape(·, [-1]) →
// Gather(·, arange(N·C) shaped [N,C,1,1]) (an as_strided identity): read as the pooled tensor.
#include <algorithm>
#include <cmath>
#include <functional>

#include "frontend/onnx/onnx_detail.h"

#include "core/error.h"
#include "core/printable.h"

namespace trident::frontend::onnx_detail {

namespace {

constexpr double kSqrt2 = 1.41421356237309504880;

bool near(double a, double b) { return std::abs(a - b) <= 1e-6 * std::abs(b); }

// The ONNX graph's wiring, for pattern matching: the node producing each name, and its readers.
struct Wiring {
  std::map<std::string, int> producer;
  std::map<std::string, std::vector<int>> readers;
  explicit Wiring(const onnx::GraphProto& g) {
    for (int i = 0; i < g.node_size(); ++i) {
      for (const auto& o : g.node(i).output()) producer[o] = i;
      for (const auto& in : g.node(i).input()) readers[in].push_back(i);
    }
    for (const auto& o : g.output()) readers[o.name()].push_back(-1);  // a graph output: never inside a pattern
  }
  // The one reader of `name`, or -1 when it has none or several.
  int only_reader(const std::string& name) const {
    auto it = readers.find(name);
    return it == readers.end() || it->second.size() != 1 ? -1 : it->second[0];
  }
};

}  // namespace

// ---- channels-last views ----

int Importer::view_input(const onnx::NodeProto& n, int i, bool& channels_last) const {
  auto it = has_input(n, i) ? channels_last_.find(n.input(i)) : channels_last_.end();
  channels_last = it != channels_last_.end();
  return channels_last ? it->second : activation(n, i);
}

void Importer::define_view(const onnx::NodeProto& n, int i, int value, bool channels_last) {
  if (!has_output(n, i)) return;
  if (out_.graph.value(value).producer == out_.graph.num_nodes() - 1)  // made for this node
    out_.graph.value(value).name = printable(n.output(i));
  if (channels_last) channels_last_[n.output(i)] = value;
  else define(n, i, value);
}

bool Importer::transpose_channels_last(const onnx::NodeProto& n) {
  const std::vector<int64_t> perm = attr_ints(n, "perm");
  const auto view = channels_last_.find(n.input(0));
  if (view != channels_last_.end()) {
    if (perm != std::vector<int64_t>{0, 3, 1, 2})
      fail(n, "transposes the channels-last view " + quoted_name(n.input(0)) + " by " + shape_str(perm) +
                  "; trident reads only the Transpose(0,3,1,2) back to [N,C,H,W]");
    define(n, 0, view->second);
    return true;
  }
  auto it = values_.find(n.input(0));
  if (perm != std::vector<int64_t>{0, 2, 3, 1} || it == values_.end() || out_.graph.value(it->second).shape.size() != 4)
    return false;
  channels_last_[n.output(0)] = it->second;
  return true;
}

// ---- LayerNormalization and Gelu ----

int Importer::emit_layernorm(const onnx::NodeProto& n, int x, bool channels_last, const Const& gamma,
                             const Const* beta, double eps) {
  const Shape xs = out_.graph.value(x).shape;
  if (!channels_last && xs.size() != 2)
    fail(n, "normalises the last axis of a " + std::to_string(xs.size()) +
                "-D tensor; trident normalises channels (of a channels-last Transpose(0,2,3,1) view) or the "
                "features of an [N, F] tensor");
  const int64_t c = xs.back();
  if (!gamma.is_float || gamma.numel() != c)
    fail(n, "scale " + quoted_name(gamma.name) + " must be float32 with " + std::to_string(c) + " values");
  if (beta && (!beta->is_float || beta->numel() != c))
    fail(n, "bias " + quoted_name(beta->name) + " must be float32 with " + std::to_string(c) + " values");
  if (!(eps > 0) || !std::isfinite(eps)) fail(n, "epsilon must be positive and finite");
  Const zeros;
  if (!beta) {
    zeros.name = node_name(n) + ".bias";
    zeros.dims = {c};
    zeros.is_float = true;
    zeros.f.assign(static_cast<size_t>(c), 0.f);
  }
  const Const& b = beta ? *beta : zeros;
  const int g = weight(n, gamma, "vector", {c}, gamma.f), bv = weight(n, b, "vector", {c}, b.f);
  return emit(n, "layernorm", {x, g, bv}, {{"eps", eps}}, 0)[0];
}

void Importer::layer_normalization(const onnx::NodeProto& n) {
  allow_attrs(n, {"axis", "epsilon", "stash_type"});
  expect_io(n, 2, 3, 1);
  bool cl = false;
  const int x = view_input(n, 0, cl);
  const int64_t rank = cl ? 4 : static_cast<int64_t>(out_.graph.value(x).shape.size());
  int64_t axis = attr_int(n, "axis", -1);
  if (axis < 0) axis += rank;
  if (axis != rank - 1)
    fail(n, "normalises from axis " + std::to_string(axis) + " of a rank-" + std::to_string(rank) +
                " tensor; trident normalises the last axis only");
  if (attr_int(n, "stash_type", 1) != 1) fail(n, "stash_type other than 1 (float32 statistics) is not supported");
  const Const& gamma = constant_of(n, 1);
  const Const* beta = has_input(n, 2) ? &constant_of(n, 2) : nullptr;
  define_view(n, 0, emit_layernorm(n, x, cl, gamma, beta, attr_float(n, "epsilon", 1e-5)), cl);
}

void Importer::gelu(const onnx::NodeProto& n) {
  allow_attrs(n, {"approximate"});
  expect_io(n, 1, 1, 1);
  const std::string approximate = attr_string(n, "approximate", "none");
  if (approximate != "none" && approximate != "tanh") fail(n, "approximate must be \"none\" or \"tanh\"");
  bool cl = false;
  const int x = view_input(n, 0, cl);
  const ir::Attrs a{{"fn", std::string(approximate == "tanh" ? "gelu_tanh" : "gelu")}};
  define_view(n, 0, emit(n, "activation", {x}, a, 0)[0], cl);
}

// ---- the as_strided identity of the dynamo exporter's pooling ----

bool Importer::reshape_to_flat(const onnx::NodeProto& n) {
  auto it = values_.find(n.input(0));
  if (it == values_.end() || !is_const(n.input(1))) return false;
  const Const& s = constant_of(n, 1);
  if (s.is_float || s.i != std::vector<int64_t>{-1}) return false;
  flat_views_[n.output(0)] = it->second;
  return true;
}

bool Importer::gather_from_flat(const onnx::NodeProto& n) {
  const auto view = flat_views_.find(n.input(0));
  if (view == flat_views_.end()) return false;
  allow_attrs(n, {"axis"});
  const Shape xs = out_.graph.value(view->second).shape;
  const Shape onnx_dims = xs.size() == 4 ? Shape{xs[0], xs[3], xs[1], xs[2]} : xs;
  const Const& idx = constant_of(n, 1);
  // The indices are written for the model's own batch; compiled for another, the same identity.
  Shape want = onnx_dims;
  if (!idx.dims.empty() && idx.dims[0] == model_batch_) want[0] = model_batch_;
  bool identity = !idx.is_float && attr_int(n, "axis", 0) == 0 && idx.dims == want &&
                  (xs.size() != 4 || (xs[1] == 1 && xs[2] == 1));  // NCHW order is NHWC order only at 1×1
  for (size_t k = 0; identity && k < idx.i.size(); ++k) identity = idx.i[k] == static_cast<int64_t>(k);
  if (!identity)
    fail(n, "gathers from the flattened " + quoted_name(n.input(0)) +
                "; trident reads such a gather only as the identity (indices 0, 1, … in the tensor's own shape)");
  define(n, 0, view->second);
  return true;
}

// ---- the TorchScript exporter's composites ----

void Importer::find_composites(const onnx::GraphProto& g) {
  const Wiring w(g);
  auto node_at = [&](int i) -> const onnx::NodeProto* { return i >= 0 ? &g.node(i) : nullptr; };
  // A float scalar: an initializer, or a Constant node's value (not converted yet at this point).
  auto scalar = [&](const std::string& name, double& v) {
    Const read;
    const Const* c = nullptr;
    auto it = consts_.find(name);
    if (it != consts_.end()) {
      c = &it->second;
    } else if (w.producer.count(name)) {
      const onnx::NodeProto& p = g.node(w.producer.at(name));
      if (p.op_type() == "Constant" && p.attribute_size() == 1 && p.attribute(0).name() == "value_float") {
        v = p.attribute(0).f();
        return true;
      }
      if (p.op_type() != "Constant" || p.attribute_size() != 1 || p.attribute(0).name() != "value" ||
          p.attribute(0).type() != onnx::AttributeProto::TENSOR)
        return false;
      try {
        read = read_tensor(p.attribute(0).t(), label_ + ": ", external_);
      } catch (const Error&) {
        return false;  // converted later, and refused there with the reason
      }
      c = &read;
    }
    if (!c || !c->is_float || c->numel() != 1) return false;
    v = c->f[0];
    return true;
  };
  // The input of binary node `b` that is not `name`, and whether `name` is one of its inputs.
  auto other = [](const onnx::NodeProto& b, const std::string& name, std::string& rest) {
    if (b.input_size() != 2) return false;
    if (b.input(0) == name) return rest = b.input(1), true;
    if (b.input(1) == name) return rest = b.input(0), true;
    return false;
  };
  // A tensor that will be a constant when its reader is converted: an initializer, a Constant
  // node's output, or an Identity of one (the TorchScript exporter shares weights so).
  std::function<bool(const std::string&, int)> constant_like = [&](const std::string& name, int depth) {
    if (is_const(name)) return true;
    auto p = w.producer.find(name);
    if (p == w.producer.end() || depth > 8) return false;
    const onnx::NodeProto& q = g.node(p->second);
    if (q.op_type() == "Constant") return true;
    return q.op_type() == "Identity" && q.input_size() == 1 && constant_like(q.input(0), depth + 1);
  };
  auto is = [](const onnx::NodeProto* p, const char* op) { return p && p->op_type() == op && p->domain().empty(); };
  auto last_axis_mean = [&](const onnx::NodeProto& r) {
    if (r.op_type() != "ReduceMean") return false;
    std::vector<int64_t> axes;
    for (const auto& a : r.attribute())
      if (a.name() == "axes") axes.assign(a.ints().begin(), a.ints().end());
    if (r.input_size() > 1) {
      auto it = consts_.find(r.input(1));
      if (it == consts_.end() || it->second.is_float) return false;
      axes = it->second.i;
    }
    for (const auto& a : r.attribute())
      if (a.name() == "keepdims" && a.i() != 1) return false;
    return axes == std::vector<int64_t>{-1} || axes == std::vector<int64_t>{3};
  };

  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& e = g.node(i);
    if (is(&e, "RandomUniformLike")) {
      // Dropout: uniform [0, 1) → Less(·, keep) → Cast float → Div(·, keep) → Mul(x, ·), or the
      // Mul first and the Div after it.
      double low = 0, high = 1, keep = 0, keep2 = 0;
      for (const auto& a : e.attribute()) {
        if (a.name() == "low") low = a.f();
        else if (a.name() == "high") high = a.f();
        else if (a.name() != "dtype" && a.name() != "seed") low = -1;  // something else: not dropout's draw
      }
      if (low != 0 || high != 1 || e.output_size() != 1) continue;
      // The draw's readers: the Less, and maybe the CastLike of the keep probability to its type.
      int less = -1;
      const auto draw_readers = w.readers.find(e.output(0));
      if (draw_readers == w.readers.end() || draw_readers->second.size() > 2) continue;
      for (int r : draw_readers->second)
        if (is(node_at(r), "Less")) less = r;
      if (less < 0 || g.node(less).input_size() != 2 || g.node(less).input(0) != e.output(0)) continue;
      // The keep probability: a scalar, or CastLike(scalar, the draw) read by the Less alone.
      const std::string& k = g.node(less).input(1);
      int keep_cast = -1;
      if (!scalar(k, keep)) {
        keep_cast = w.producer.count(k) ? w.producer.at(k) : -1;
        const onnx::NodeProto* c = node_at(keep_cast);
        if (!is(c, "CastLike") || c->input_size() != 2 || c->input(1) != e.output(0) || w.only_reader(k) != less ||
            !scalar(c->input(0), keep))
          continue;
      }
      if (draw_readers->second.size() == 2 && (keep_cast < 0 || (draw_readers->second[0] != keep_cast &&
                                                                 draw_readers->second[1] != keep_cast)))
        continue;
      if (!(keep > 0 && keep <= 1)) continue;
      const int cast = w.only_reader(g.node(less).output(0));
      if (!is(node_at(cast), "Cast") && !is(node_at(cast), "CastLike")) continue;
      const int first = w.only_reader(g.node(cast).output(0));
      const int second = first >= 0 ? w.only_reader(g.node(first).output(0)) : -1;
      if (!node_at(first) || !node_at(second)) continue;
      std::string x;
      const onnx::NodeProto &f = g.node(first), &s = g.node(second);
      if (is(&f, "Div") && f.input(0) == g.node(cast).output(0) && f.input_size() == 2 && scalar(f.input(1), keep2) &&
          is(&s, "Mul") && other(s, f.output(0), x)) {
      } else if (is(&f, "Mul") && other(f, g.node(cast).output(0), x) && is(&s, "Div") && s.input_size() == 2 &&
                 s.input(0) == f.output(0) && scalar(s.input(1), keep2)) {
      } else {
        continue;
      }
      if (!near(keep2, keep) || constant_like(x, 0)) continue;
      composites_[second] = {"dropout", x, "", "", 1 - keep, e.input(0)};
      for (int k : {i, less, cast, first, keep_cast})
        if (k >= 0) inside_composite_.insert(k);
      continue;
    }
    if (e.op_type() == "Erf" && e.input_size() == 1) {
      // GELU: scale → Erf → Add 1 → Mul x → Mul 0.5.
      const onnx::NodeProto* s = node_at(w.producer.count(e.input(0)) ? w.producer.at(e.input(0)) : -1);
      std::string x, c;
      double v = 0;
      if (!s || w.only_reader(e.input(0)) != i || !(is(s, "Div") || is(s, "Mul")) || s->input_size() != 2) continue;
      x = s->input(0), c = s->input(1);
      if (!scalar(c, v) || !(is(s, "Div") ? near(v, kSqrt2) : near(v, 1 / kSqrt2))) continue;
      const int add = w.only_reader(e.output(0)), mul = add >= 0 ? w.only_reader(g.node(add).output(0)) : -1;
      const int half = mul >= 0 ? w.only_reader(g.node(mul).output(0)) : -1;
      std::string one, xx, h;
      if (!is(node_at(add), "Add") || !other(g.node(add), e.output(0), one) || !scalar(one, v) || v != 1) continue;
      if (!is(node_at(mul), "Mul") || !other(g.node(mul), g.node(add).output(0), xx) || xx != x) continue;
      if (!is(node_at(half), "Mul") || !other(g.node(half), g.node(mul).output(0), h) || !scalar(h, v) || v != 0.5) continue;
      composites_[half] = {"gelu", x, "", "", 0, ""};
      for (int k : {w.producer.at(e.input(0)), i, add, mul}) inside_composite_.insert(k);
      continue;
    }
    if (e.op_type() != "ReduceMean" || !last_axis_mean(e) || e.input_size() < 1) continue;
    // LayerNorm: mean → Sub → Pow 2 → mean → Add eps → Sqrt → Div → Mul γ → Add β.
    const std::string x = e.input(0);
    const int sub = w.only_reader(e.output(0));
    std::string rest;
    if (!is(node_at(sub), "Sub") || g.node(sub).input_size() != 2 || g.node(sub).input(0) != x ||
        g.node(sub).input(1) != e.output(0))
      continue;
    const std::string d = g.node(sub).output(0);
    const auto dr = w.readers.find(d);
    if (dr == w.readers.end() || dr->second.size() != 2) continue;
    int pow = -1, div = -1;
    for (int r : dr->second) (is(node_at(r), "Pow") ? pow : div) = r;
    double v = 0;
    if (!is(node_at(pow), "Pow") || g.node(pow).input(0) != d || !scalar(g.node(pow).input(1), v) || v != 2) continue;
    if (!is(node_at(div), "Div") || g.node(div).input(0) != d) continue;
    const int mean2 = w.only_reader(g.node(pow).output(0));
    if (!is(node_at(mean2), "ReduceMean") || !last_axis_mean(g.node(mean2))) continue;
    const int add = w.only_reader(g.node(mean2).output(0));
    double eps = 0;
    if (!is(node_at(add), "Add") || !other(g.node(add), g.node(mean2).output(0), rest) || !scalar(rest, eps)) continue;
    const int sqrt = w.only_reader(g.node(add).output(0));
    if (!is(node_at(sqrt), "Sqrt") || w.only_reader(g.node(sqrt).output(0)) != div ||
        g.node(div).input(1) != g.node(sqrt).output(0))
      continue;
    const int mul = w.only_reader(g.node(div).output(0));
    std::string gamma, beta;
    if (!is(node_at(mul), "Mul") || !other(g.node(mul), g.node(div).output(0), gamma) || !constant_like(gamma, 0)) continue;
    const int shift = w.only_reader(g.node(mul).output(0));
    if (!is(node_at(shift), "Add") || !other(g.node(shift), g.node(mul).output(0), beta) || !constant_like(beta, 0))
      continue;
    composites_[shift] = {"layernorm", x, gamma, beta, eps, ""};
    for (int k : {i, sub, pow, mean2, add, sqrt, div, mul}) inside_composite_.insert(k);
  }
}

void Importer::convert_composite(const onnx::NodeProto& n, const Composite& c) {
  onnx::NodeProto reads;  // the composite as one node reading its input, for the readers' checks
  reads.set_name(n.name());
  reads.set_op_type(c.kind == "dropout" ? "Dropout" : n.op_type());  // what the readers' checks see
  reads.add_input(c.x);
  bool cl = false;
  const int x = view_input(reads, 0, cl);
  if (c.kind == "gelu") {
    define_view(n, 0, emit(n, "activation", {x}, {{"fn", std::string("gelu")}}, 0)[0], cl);
    return;
  }
  if (c.kind == "dropout") {
    if (cl) fail(n, "drops out of a channels-last view, which trident does not support");
    // The draw's shape: x's (dropout) or [N,1,1,1] (stochastic depth), the batch the trace's.
    const Shape& s = out_.graph.value(x).shape;
    const Shape dims = s.size() == 4 ? Shape{s[0], s[3], s[1], s[2]} : s;
    if (!is_const(c.like)) fail(n, "draws random numbers shaped like the computed " + quoted_name(c.like) + ", which trident does not support");
    const Shape& like = consts_.at(c.like).dims;
    auto same_but_batch = [&](const Shape& want) {
      return like.size() == want.size() && std::equal(like.begin() + 1, like.end(), want.begin() + 1);
    };
    Shape per_sample(dims.size(), 1);
    if (!dims.empty()) per_sample[0] = dims[0];
    if (same_but_batch(dims)) emit_dropout(n, x, c.eps, false);
    else if (dims.size() > 1 && same_but_batch(per_sample)) emit_dropout(n, x, c.eps, true);
    else
      fail(n, "drops out with random numbers of shape " + shape_str(like) + " over a tensor of " + shape_str(dims) +
                  "; trident's dropout draws per element or per sample");
    return;
  }
  if (!is_const(c.gamma) || !is_const(c.beta))
    fail(n, "the scale or bias of a LayerNorm (" + quoted_name(c.gamma) + ", " + quoted_name(c.beta) + ") is not a constant");
  const Const &gamma = consts_.at(c.gamma), &beta = consts_.at(c.beta);
  define_view(n, 0, emit_layernorm(n, x, cl, gamma, &beta, c.eps), cl);
}

}  // namespace trident::frontend::onnx_detail
