// ONNX op → trident op conversion, one function per op type. Weights are converted from ONNX
// layouts (OIHW, [in,out]) to trident's (OHWI, [out,in]) here, once, by core/tensor_layout.h;
// every unsupported attribute value is an error naming the node rather than a silently
// different network.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/printable.h"
#include "core/tensor_layout.h"
#include "frontend/onnx/onnx_detail.h"

namespace trident::frontend::onnx_detail {

namespace {

struct Window {
  std::vector<int64_t> kernel{0, 0}, stride{1, 1}, pad{0, 0}, dilation{1, 1};
};

// Checks that `v` has two entries at least `min` (or is empty: the default stays).
bool pair_ok(const std::vector<int64_t>& v, int64_t min) {
  return v.size() == 2 && v[0] >= min && v[1] >= min;
}

// An ONNX [in, out] matrix (Gemm, MatMul) as trident's [out, in].
std::vector<float> transpose2d(const Const& b) { return transpose_2d(b.f, b.dims[0], b.dims[1]); }

ir::Attrs window_attrs(const Window& w, bool conv) {
  ir::Attrs a{{"stride", w.stride}, {"padding", w.pad}};
  if (conv) a.set("dilation", w.dilation);
  else a.set("kernel", w.kernel);
  return a;
}

}  // namespace

// kernel_shape/strides/pads/dilations/auto_pad, shared by Conv and the pools.
static Window read_window(const Importer& im, const onnx::NodeProto& n,
                          std::vector<int64_t> (Importer::*ints)(const onnx::NodeProto&, const char*) const,
                          std::string (Importer::*str)(const onnx::NodeProto&, const char*, const std::string&) const,
                          void (Importer::*fail)(const onnx::NodeProto&, const std::string&) const) {
  Window w;
  const std::string auto_pad = (im.*str)(n, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    (im.*fail)(n, "auto_pad " + quoted_name(auto_pad) + " is not supported (only NOTSET and VALID)");
  auto k = (im.*ints)(n, "kernel_shape"), s = (im.*ints)(n, "strides"), p = (im.*ints)(n, "pads"),
       d = (im.*ints)(n, "dilations");
  if (!k.empty()) {
    if (!pair_ok(k, 1)) (im.*fail)(n, "kernel_shape must be two positive values (2-D only)");
    w.kernel = k;
  }
  if (!s.empty()) {
    if (!pair_ok(s, 1)) (im.*fail)(n, "strides must be two positive values");
    w.stride = s;
  }
  if (!d.empty()) {
    if (!pair_ok(d, 1)) (im.*fail)(n, "dilations must be two positive values");
    w.dilation = d;
  }
  if (!p.empty()) {
    if (p.size() != 4 || p[0] < 0 || p[1] < 0) (im.*fail)(n, "pads must be four non-negative values");
    if (p[0] != p[2] || p[1] != p[3])
      (im.*fail)(n, "asymmetric pads [" + std::to_string(p[0]) + "," + std::to_string(p[1]) + "," +
                        std::to_string(p[2]) + "," + std::to_string(p[3]) + "] are not supported");
    if (auto_pad == "VALID" && (p[0] || p[1])) (im.*fail)(n, "pads contradict auto_pad VALID");
    w.pad = {p[0], p[1]};
  }
  return w;
}

#define READ_WINDOW(n) \
  read_window(*this, n, &Importer::attr_ints, &Importer::attr_string, &Importer::fail)

void Importer::conv(const onnx::NodeProto& n) {
  allow_attrs(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  expect_io(n, 2, 3, 1);
  int x = activation(n, 0);
  const Const& w = constant_of(n, 1);
  if (out_.graph.value(x).shape.size() != 4) fail(n, "input must be a 4-D [N,C,H,W] tensor");
  notice_off_grid_weight(n, w.name);
  if (!w.is_float || w.dims.size() != 4) fail(n, "weight " + quoted_name(w.name) + " must be a 4-D float32 OIHW tensor");
  Window win = READ_WINDOW(n);
  absorb_pad(n, x, win.pad, nullptr, false, nullptr);  // a zero Pad before it: its own zero padding
  if (attr(n, "kernel_shape", onnx::AttributeProto::INTS) &&
      (win.kernel[0] != w.dims[2] || win.kernel[1] != w.dims[3]))
    fail(n, "kernel_shape disagrees with weight " + quoted_name(w.name) + " dims " + shape_str(w.dims));
  const int64_t groups = attr_int(n, "group", 1);
  if (groups < 1 || groups > kMaxAttrInt) fail(n, "group must be positive");
  std::vector<int> in{x, weight(n, w, "conv_ohwi", {w.dims[0], w.dims[2], w.dims[3], w.dims[1]},
                                oihw_to_ohwi(w.f, w.dims))};
  if (has_input(n, 2)) {
    const Const& b = constant_of(n, 2);
    if (!b.is_float || b.dims != Shape{w.dims[0]})
      fail(n, "bias " + quoted_name(b.name) + " must be float32 of shape [" + std::to_string(w.dims[0]) + "]");
    // Zeros computed at import are how the dynamo exporter writes a convolution without bias
    // (bias=False): no parameter, as in the PyTorch model.
    const bool exported_no_bias = b.derived && std::all_of(b.f.begin(), b.f.end(), [](float v) { return v == 0.f; });
    if (!exported_no_bias) in.push_back(weight(n, b, "vector", b.dims, b.f));
  }
  ir::Attrs a = window_attrs(win, true);
  a.set("groups", groups);
  emit(n, "conv2d", in, a);
}

void Importer::batchnorm(const onnx::NodeProto& n) {
  allow_attrs(n, {"epsilon", "momentum", "training_mode", "spatial"});
  const int64_t exported_training = attr_int(n, "training_mode", 0);
  if (exported_training != 0 && exported_training != 1) fail(n, "training_mode must be 0 or 1");
  if (attr_int(n, "spatial", 1) != 1) fail(n, "spatial=0 is not supported");
  expect_io(n, 5, 5, exported_training ? 3 : 1);
  const int64_t training = exported_training || options_.train;
  if (exported_training && !options_.train && !training_bn_noticed_) {
    out_.notices.push_back("BatchNormalization (first at node '" + node_name(n) + "') was exported in training "
                           "mode, which normalises with batch statistics; inference uses the running statistics");
    training_bn_noticed_ = true;
  }
  const int x = activation(n, 0);
  const Shape xs = out_.graph.value(x).shape;
  if (xs.size() != 4) fail(n, "input must be a 4-D [N,C,H,W] tensor");
  const Shape c{xs[3]};
  std::vector<int> in{x};
  static const char* const kNames[] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; ++i) {
    const Const& t = constant_of(n, i);
    if (!t.is_float || t.numel() != c[0] || t.dims.size() != 1)
      fail(n, std::string(kNames[i - 1]) + " " + quoted_name(t.name) + " must be float32 of shape " + shape_str(c));
    // A non-finite statistic or a negative variance makes every output NaN.
    for (size_t k = 0; k < t.f.size(); ++k)
      if (!std::isfinite(t.f[k]) || (i == 4 && t.f[k] < 0))
        fail(n, std::string(kNames[i - 1]) + " " + quoted_name(t.name) + " holds " + std::to_string(t.f[k]) +
                    " at channel " + std::to_string(k) + "; it must be finite" +
                    (i == 4 ? " and not negative (the outputs would be NaN)" : ""));
    in.push_back(weight(n, t, "vector", c, t.f, i >= 3));
  }
  const double eps = attr_float(n, "epsilon", 1e-5);
  const double momentum = attr_float(n, "momentum", 0.9);
  if (!(eps > 0) || !(momentum >= 0 && momentum <= 1)) fail(n, "epsilon or momentum is out of range");
  ir::Attrs a{{"eps", eps}, {"momentum", 1.0 - momentum}, {"training", training}};
  const auto outs = emit(n, "batchnorm2d", in, a);
  if (exported_training) {  // ONNX outputs 1, 2 are the updated running statistics
    for (int i = 1; i < 3; ++i)
      if (has_output(n, i)) {
        out_.graph.value(outs[i + 2]).name = printable(n.output(i));
        define(n, i, outs[i + 2]);
      }
  }
}

void Importer::unary(const onnx::NodeProto& n, const std::string& op) {
  allow_attrs(n, {});
  expect_io(n, 1, 1, 1);
  const int x = activation(n, 0);
  if (op == "global_avgpool" && out_.graph.value(x).shape.size() != 4)
    fail(n, "input must be a 4-D [N,C,H,W] tensor");
  emit(n, op, {x}, {});
}

// ReduceMean over H and W of an [N,C,H,W] tensor, which PyTorch's dynamo exporter writes for
// adaptive average pooling to 1×1: global_avgpool, then a flatten when keepdims = 0. The axes
// are an attribute before opset 18 and a constant input from it on.
void Importer::reduce_mean(const onnx::NodeProto& n) {
  allow_attrs(n, {"axes", "keepdims", "noop_with_empty_axes"});
  expect_io(n, 1, 2, 1);
  const int x = activation(n, 0);
  if (out_.graph.value(x).shape.size() != 4) fail(n, "only a mean over H and W of a 4-D [N,C,H,W] tensor is supported");
  std::vector<int64_t> axes = attr_ints(n, "axes");
  if (has_input(n, 1)) {
    const Const& a = constant_of(n, 1);
    if (a.is_float || a.dims.size() != 1) fail(n, "axes " + quoted_name(a.name) + " must be a 1-D int64 tensor");
    axes = a.i;
  }
  for (int64_t& a : axes) a = a < 0 ? a + 4 : a;
  std::sort(axes.begin(), axes.end());
  if (axes != std::vector<int64_t>{2, 3})
    fail(n, "only a mean over H and W (axes 2 and 3) is supported, got axes " + shape_str(axes));
  if (attr_int(n, "keepdims", 1) != 0) {
    emit(n, "global_avgpool", {x}, {});
    return;
  }
  const int pooled = emit(n, "global_avgpool", {x}, {}, 0)[0];
  out_.graph.node(out_.graph.value(pooled).producer).name += ".pool";
  emit(n, "flatten", {pooled}, {});
}

// Sigmoid, HardSigmoid (ONNX's defaults alpha 0.2, beta 0.5; PyTorch writes 1/6) and
// HardSwish as trident's activation op (ops/activation.cpp). PyTorch's SiLU arrives as
// Mul(x, Sigmoid(x)) and stays that pair.
void Importer::pointwise(const onnx::NodeProto& n) {
  const std::string& t = n.op_type();
  if (t == "HardSigmoid") allow_attrs(n, {"alpha", "beta"});
  else allow_attrs(n, {});
  expect_io(n, 1, 1, 1);
  ir::Attrs a;
  a.set("fn", std::string(t == "Sigmoid" ? "sigmoid" : t == "HardSigmoid" ? "hardsigmoid" : "hardswish"));
  if (t == "HardSigmoid") {
    const double alpha = attr_float(n, "alpha", 0.2), beta = attr_float(n, "beta", 0.5);
    if (!std::isfinite(alpha) || !std::isfinite(beta)) fail(n, "alpha and beta must be finite");
    a.set("alpha", alpha);
    a.set("beta", beta);
  }
  emit(n, "activation", {activation(n, 0)}, a);
}

void Importer::clip(const onnx::NodeProto& n) {
  allow_attrs(n, {"min", "max"});
  expect_io(n, 1, 3, 1);
  const int x = activation(n, 0);
  double lo = attr_float(n, "min", -std::numeric_limits<double>::infinity());
  double hi = attr_float(n, "max", std::numeric_limits<double>::infinity());
  for (int i = 1; i < 3; ++i) {
    if (!has_input(n, i)) continue;
    const Const& b = constant_of(n, i);
    if (!b.is_float || b.numel() != 1) fail(n, "bound " + quoted_name(b.name) + " must be a float32 scalar");
    (i == 1 ? lo : hi) = b.f[0];
  }
  if (std::isnan(lo) || std::isnan(hi) || lo > hi) fail(n, "min and max are not an interval");
  if (lo == 0 && std::isinf(hi)) {
    emit(n, "relu", {x}, {});
    return;
  }
  ir::Attrs a;
  if (!std::isinf(lo)) a.set("min", lo);
  if (!std::isinf(hi)) a.set("max", hi);
  emit(n, "clip", {x}, a);
}

void Importer::pool(const onnx::NodeProto& n, bool max) {
  if (max) allow_attrs(n, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"});
  else allow_attrs(n, {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"});
  expect_io(n, 1, 1, 1);
  int x = activation(n, 0);
  if (out_.graph.value(x).shape.size() != 4) fail(n, "input must be a 4-D [N,C,H,W] tensor");
  Window win = READ_WINDOW(n);
  if (!attr(n, "kernel_shape", onnx::AttributeProto::INTS)) fail(n, "kernel_shape is required");
  if (win.dilation != std::vector<int64_t>{1, 1}) fail(n, "dilated pooling is not supported");
  const int64_t ceil_mode = attr_int(n, "ceil_mode", 0);
  if (ceil_mode != 0 && ceil_mode != 1) fail(n, "ceil_mode must be 0 or 1");
  if (ceil_mode && !max) fail(n, "ceil_mode=1 is supported for max pooling only");
  int64_t cip = attr_int(n, "count_include_pad", 0);
  if (!max && cip != 0 && cip != 1) fail(n, "count_include_pad must be 0 or 1");
  absorb_pad(n, x, win.pad, &win.kernel, max, &cip);  // a zero Pad before it, where that is the same
  ir::Attrs a = window_attrs(win, false);
  if (ceil_mode) a.set("ceil_mode", ceil_mode);
  if (!max) a.set("count_include_pad", cip);
  emit(n, max ? "maxpool2d" : "avgpool2d", {x}, a);
}

void Importer::add(const onnx::NodeProto& n) {
  allow_attrs(n, {});
  expect_io(n, 2, 2, 1);
  if (!is_const(n.input(0)) && !is_const(n.input(1))) {
    bool cl0 = false, cl1 = false;
    const int a = view_input(n, 0, cl0), b = view_input(n, 1, cl1);
    if (cl0 != cl1) fail(n, "adds a channels-last view to an [N,C,H,W] tensor");
    define_view(n, 0, emit(n, "add", {a, b}, {}, 0)[0], cl0);
    return;
  }
  // MatMul + Add(bias), as PyTorch exports a Linear without Gemm: the bias joins the linear (or
  // the 1×1 convolution of a MatMul over a channels-last view).
  const int ci = is_const(n.input(0)) ? 0 : 1;
  bool cl = false;
  const int x = view_input(n, 1 - ci, cl);
  const Const& b = constant_of(n, ci);
  auto it = bare_linear_.find(x);
  const int64_t out_features = out_.graph.value(x).shape.back();
  if (it == bare_linear_.end() || uses_[n.input(1 - ci)] != 1)
    fail(n, "adding a constant is supported only as the bias of a preceding MatMul");
  if (!b.is_float || b.numel() != out_features || b.dims.size() > 2)
    fail(n, "bias " + quoted_name(b.name) + " must be float32 with " + std::to_string(out_features) + " values");
  out_.graph.node(it->second).inputs.push_back(weight(n, b, "vector", {out_features}, b.f));
  bare_linear_.erase(it);
  out_.graph.value(x).name = printable(n.output(0));
  define_view(n, 0, x, cl);
}

void Importer::mul(const onnx::NodeProto& n) {
  allow_attrs(n, {});
  expect_io(n, 2, 2, 1);
  if (!is_const(n.input(0)) && !is_const(n.input(1))) {
    // Two activations: the same shape (SiLU's x·sigmoid(x)), or a per-sample gate [N,C,1,1]
    // (squeeze-excitation) on either side, which trident's mul takes second.
    int a = activation(n, 0), b = activation(n, 1);
    if (numel(out_.graph.value(a).shape) < numel(out_.graph.value(b).shape)) std::swap(a, b);
    emit(n, "mul", {a, b}, {});
    return;
  }
  const int ci = is_const(n.input(0)) ? 0 : 1;
  const int x = activation(n, 1 - ci);
  const Const& s = constant_of(n, ci);
  const Shape xs = out_.graph.value(x).shape;
  const int64_t c = xs.back();
  // Accepted constant shapes: a scalar, [C], [1,C], [C,1,1] or [1,C,1,1] (per channel).
  int64_t non_one = 0, channel_axis = -1;
  for (size_t i = 0; i < s.dims.size(); ++i)
    if (s.dims[i] != 1) ++non_one, channel_axis = static_cast<int64_t>(i);
  const int64_t expect_axis = static_cast<int64_t>(s.dims.size()) - (xs.size() == 4 ? 3 : 1);
  const bool per_channel = s.numel() == c && non_one <= 1 && (non_one == 0 || channel_axis == expect_axis);
  if (!s.is_float || !(s.numel() == 1 || per_channel))
    fail(n, "constant " + quoted_name(s.name) + " " + shape_str(s.dims) + " must be a float32 scalar or hold one value per channel");
  std::vector<float> v = s.numel() == 1 ? std::vector<float>(c, s.f[0]) : s.f;
  const int factor = weight(n, s, "channel_vector", {c}, std::move(v));
  // factor_dims: the factor's shape in the model's own state dict (ConvNeXt's layer scale is
  // [C, 1, 1]) where it holds the same C values in another shape (frontend/torch_layout.h).
  if (per_channel && s.numel() > 1 && s.dims != Shape{c})
    emit(n, "mul", {x, factor}, {{"factor_dims", s.dims}});
  else
    emit(n, "mul", {x, factor}, {});
}

void Importer::flatten(const onnx::NodeProto& n) {
  allow_attrs(n, {"axis"});
  expect_io(n, 1, 1, 1);
  const int x = activation(n, 0);
  const Shape xs = out_.graph.value(x).shape;  // a copy: emit() adds values, which moves them all
  if (attr_int(n, "axis", 1) != 1) fail(n, "only axis=1 is supported");
  if (xs.size() == 2) return define(n, 0, x);
  const int y = emit(n, "flatten", {x}, {})[0];
  if (xs.size() == 4 && xs[1] * xs[2] > 1 && xs[3] > 1) chw_flattened_[y] = {xs[3], xs[1], xs[2]};
}

void Importer::reshape(const onnx::NodeProto& n) {
  allow_attrs(n, {"allowzero"});
  expect_io(n, 2, 2, 1);
  if (is_const(n.input(0))) return fold_reshape(n);  // a constant's new dims (onnx_shape_fold.cpp)
  if (reshape_for_shuffle(n) || reshape_to_flat(n)) return;
  const int x = activation(n, 0);
  const Const& s = constant_of(n, 1);
  if (s.is_float || s.dims.size() != 1) fail(n, "shape " + quoted_name(s.name) + " must be a 1-D int64 tensor");
  const Shape xs = out_.graph.value(x).shape;  // a copy: emit() adds values, which moves them all
  const int64_t total = numel(xs);
  // ONNX dims of the input, for the "0 copies the input extent" rule.
  const Shape onnx_dims = xs.size() == 4 ? Shape{xs[0], xs[3], xs[1], xs[2]} : xs;
  // [N, C] back to [N, C, 1, 1] (the dynamo exporter's view around an in-place dropout on pooled
  // features): NHWC [N, 1, 1, C] holds the same bytes, so it is a view.
  if (xs.size() == 2 && s.i.size() == 4 && (s.i[0] == xs[0] || s.i[0] == model_batch_ || s.i[0] == -1 || s.i[0] == 0) &&
      (s.i[1] == xs[1] || s.i[1] == -1 || s.i[1] == 0) && s.i[2] == 1 && s.i[3] == 1) {
    emit(n, "reshape", {x}, {{"shape", Shape{xs[0], 1, 1, xs[1]}}});
    return;
  }
  if (s.i.size() != 2)
    fail(n, "only reshapes to 2-D [N, features] (and of [N, C] to [N, C, 1, 1]) are supported, got " + shape_str(s.i));
  if (attr_int(n, "allowzero", 0) != 0 && (s.i[0] == 0 || s.i[1] == 0))
    fail(n, "allowzero with a zero extent is not supported");
  int64_t d0 = s.i[0] == 0 ? onnx_dims[0] : s.i[0];
  int64_t d1 = s.i[1] == 0 ? onnx_dims[1] : s.i[1];
  // Batch override: a flatten written for the model's own batch (-1 features, or the dynamo
  // exporter's fixed [batch, features]) flattens the batch being compiled.
  if (d0 == model_batch_ && xs[0] != model_batch_ && (s.i[1] == -1 || d1 == total / xs[0])) d0 = xs[0];
  if (d0 == -1 && d1 > 0 && total % d1 == 0) d0 = total / d1;
  if (d1 == -1 && d0 > 0 && total % d0 == 0) d1 = total / d0;
  // d1 comes from the file and may be near 2^63: compare by division, never by d0 * d1.
  if (d0 != xs[0] || d1 <= 0 || total % d0 != 0 || d1 != total / d0)
    fail(n, "reshape of " + shape_str(onnx_dims) + " to " + shape_str(s.i) +
                " is not a flatten to [N, features], the only reshape supported");
  if (xs.size() == 2) return define(n, 0, x);
  const int y = emit(n, "flatten", {x}, {})[0];
  if (xs.size() == 4 && xs[1] * xs[2] > 1 && xs[3] > 1) chw_flattened_[y] = {xs[3], xs[1], xs[2]};
}

std::vector<float> Importer::match_flatten_order(const onnx::NodeProto& n, int x, std::vector<float> data,
                                                 int64_t out_f, int64_t in_f, std::string& layout) const {
  auto it = chw_flattened_.find(x);
  if (it == chw_flattened_.end()) return data;
  const auto [C, H, W] = it->second;
  if (C * H * W != in_f) fail(n, "the flattened input has " + std::to_string(C * H * W) + " features, the weight " + std::to_string(in_f));
  // trident's feature g = (h·W + w)·C + c reads ONNX's feature c·H·W + h·W + w.
  HostTensor m{{out_f, in_f}, DType::f32, std::vector<std::byte>(data.size() * sizeof(float))};
  std::memcpy(m.data.data(), data.data(), m.data.size());
  const HostTensor hwc = chw_columns_to_hwc(m, C, H, W);
  std::memcpy(data.data(), hwc.data.data(), hwc.data.size());
  layout += "/hwc" + std::to_string(C) + "x" + std::to_string(H) + "x" + std::to_string(W);
  return data;
}

void Importer::gemm(const onnx::NodeProto& n) {
  allow_attrs(n, {"alpha", "beta", "transA", "transB"});
  expect_io(n, 2, 3, 1);
  if (attr_float(n, "alpha", 1.0) != 1.0 || attr_float(n, "beta", 1.0) != 1.0)
    fail(n, "alpha and beta other than 1 are not supported");
  if (attr_int(n, "transA", 0) != 0) fail(n, "transA=1 is not supported");
  const int64_t trans_b = attr_int(n, "transB", 0);
  if (trans_b != 0 && trans_b != 1) fail(n, "transB must be 0 or 1");
  const int x = activation(n, 0);
  const Const& b = constant_of(n, 1);
  if (out_.graph.value(x).shape.size() != 2) fail(n, "input A must be 2-D [N, features]");
  if (!b.is_float || b.dims.size() != 2) fail(n, "B " + quoted_name(b.name) + " must be a 2-D float32 tensor");
  const int64_t out_f = trans_b ? b.dims[0] : b.dims[1], in_f = trans_b ? b.dims[1] : b.dims[0];
  std::string layout = trans_b ? "linear" : "linear_from_kn";
  std::vector<float> w = match_flatten_order(n, x, trans_b ? b.f : transpose2d(b), out_f, in_f, layout);
  std::vector<int> in{x, weight(n, b, layout, {out_f, in_f}, std::move(w))};
  if (has_input(n, 2)) {
    const Const& c = constant_of(n, 2);
    if (!c.is_float || c.numel() != out_f || (c.dims.size() == 2 && c.dims[0] != 1) || c.dims.size() > 2)
      fail(n, "C " + quoted_name(c.name) + " must be float32 of shape [" + std::to_string(out_f) + "]");
    in.push_back(weight(n, c, "vector", {out_f}, c.f));
  }
  emit(n, "linear", in, {});
}

void Importer::matmul(const onnx::NodeProto& n) {
  allow_attrs(n, {});
  expect_io(n, 2, 2, 1);
  bool cl = false;
  const int x = view_input(n, 0, cl);
  const Const& b = constant_of(n, 1);
  if (cl) {
    // [N,H,W,C]·[C,K] per pixel: a 1×1 convolution of the NHWC tensor, weights [K,1,1,C].
    const int64_t c = out_.graph.value(x).shape.back();
    if (!b.is_float || b.dims.size() != 2 || b.dims[0] != c)
      fail(n, "B " + quoted_name(b.name) + " must be a float32 [" + std::to_string(c) + ", K] matrix");
    const int w = weight(n, b, "conv1x1_from_kn", {b.dims[1], 1, 1, c}, transpose2d(b));
    // from_matmul: a state dict gives this weight as nn.Linear's [K, C] (frontend/torch_layout.h).
    const auto outs = emit(n, "conv2d", {x, w},
                           {{"stride", Shape{1, 1}}, {"padding", Shape{0, 0}}, {"from_matmul", int64_t{1}}}, 0);
    bare_linear_[outs[0]] = out_.graph.value(outs[0]).producer;
    define_view(n, 0, outs[0], true);
    return;
  }
  if (out_.graph.value(x).shape.size() != 2) fail(n, "input A must be 2-D [N, features]");
  if (!b.is_float || b.dims.size() != 2) fail(n, "B " + quoted_name(b.name) + " must be a 2-D float32 tensor");
  std::string layout = "linear_from_kn";
  std::vector<float> w = match_flatten_order(n, x, transpose2d(b), b.dims[1], b.dims[0], layout);
  const auto outs = emit(n, "linear", {x, weight(n, b, layout, {b.dims[1], b.dims[0]}, std::move(w))}, {});
  bare_linear_[outs[0]] = out_.graph.value(outs[0]).producer;
}

void Importer::concat(const onnx::NodeProto& n) {
  allow_attrs(n, {"axis"});
  expect_io(n, 1, 1 << 16, 1);
  std::vector<int> in;
  for (int i = 0; i < n.input_size(); ++i) in.push_back(activation(n, i));
  const int64_t rank = static_cast<int64_t>(out_.graph.value(in[0]).shape.size());
  int64_t axis = attr_int(n, "axis", std::numeric_limits<int64_t>::min());
  if (axis == std::numeric_limits<int64_t>::min()) fail(n, "axis is required");
  if (axis < 0) axis += rank;
  if (axis != 1) fail(n, "only concatenation along channels (axis 1) is supported");
  if (in.size() == 1) return define(n, 0, in[0]);  // DenseNet's first layer of a block: an identity
  emit(n, "concat", in, {});
}

void Importer::constant(const onnx::NodeProto& n) {
  allow_attrs(n, {"value", "value_float", "value_floats", "value_int", "value_ints"});
  expect_io(n, 0, 0, 1);
  if (n.attribute_size() != 1) fail(n, "needs exactly one value attribute");
  const auto& a = n.attribute(0);
  Const c;
  if (a.name() == "value") {
    if (a.type() != onnx::AttributeProto::TENSOR) fail(n, "attribute 'value' must be a tensor");
    try {
      c = read_tensor(a.t(), label_ + ": node '" + node_name(n) + "': ", external_);
    } catch (const Error& e) {
      fail(n, e.what());
    }
  } else if (a.name() == "value_float") {
    c.is_float = true, c.f = {a.f()};
  } else if (a.name() == "value_int") {
    c.i = {a.i()};
  } else if (a.name() == "value_floats") {
    c.is_float = true, c.f.assign(a.floats().begin(), a.floats().end()), c.dims = {c.numel()};
  } else {
    c.i.assign(a.ints().begin(), a.ints().end()), c.dims = {c.numel()};
  }
  c.name = n.output(0);
  consts_[n.output(0)] = std::move(c);
}

// Dropout(x, ratio, training_mode) (ratio an attribute before opset 12; 0.5 by default). A
// training import trains it as PyTorch's model.train() does, whatever training_mode says (an
// eval-mode export drops Dropout altogether); an inference import reads it as the identity.
void Importer::dropout(const onnx::NodeProto& n) {
  allow_attrs(n, {"seed", "ratio", "is_test"});
  expect_io(n, 1, 3, 1);
  double p = attr_float(n, "ratio", 0.5);
  if (has_input(n, 1)) {
    const Const& r = constant_of(n, 1);
    if (!r.is_float || r.numel() != 1) fail(n, "ratio " + quoted_name(r.name) + " must be one float");
    p = r.f[0];
  }
  if (!(p >= 0 && p < 1)) fail(n, "ratio " + std::to_string(p) + " is not a probability below 1");
  if (has_input(n, 2)) {  // training_mode: a training-mode export says true
    const Const& t = constant_of(n, 2);
    if (t.numel() != 1 || t.is_float) fail(n, "training_mode must be one bool");
    if (t.i[0] != 0 && !options_.train && !dropout_noticed_) {
      out_.notices.push_back("Dropout (first at node '" + node_name(n) + "') is exported in training mode; trident "
                             "runs it as the identity of inference");
      dropout_noticed_ = true;
    }
  }
  if (is_const(n.input(0))) fail(n, "drops out of a constant, which trident does not support");
  emit_dropout(n, activation(n, 0), p);
}

void Importer::emit_dropout(const onnx::NodeProto& n, int x, double p, bool per_sample) {
  if (!options_.train || p == 0) {
    define(n, 0, x);
    return;
  }
  const int y = emit(n, "dropout", {x}, {{"p", p}, {"per_sample", int64_t{per_sample}}})[0];
  if (const auto flat = chw_flattened_.find(x); flat != chw_flattened_.end()) chw_flattened_[y] = flat->second;
}

void Importer::alias(const onnx::NodeProto& n) {
  allow_attrs(n, {});
  expect_io(n, 1, 1, 1);
  // An Identity of a view (the dynamo exporter's clone of a shuffle's transposed view) is that view.
  for (auto* views : {&shuffle_split_, &shuffle_transposed_})
    if (const auto v = views->find(n.input(0)); v != views->end()) {
      (*views)[n.output(0)] = v->second;
      return;
    }
  for (auto* views : {&channels_last_, &flat_views_})
    if (const auto v = views->find(n.input(0)); v != views->end()) {
      (*views)[n.output(0)] = v->second;
      return;
    }
  if (is_const(n.input(0))) {
    consts_[n.output(0)] = consts_.at(n.input(0));
    return;
  }
  define(n, 0, activation(n, 0));
}

}  // namespace trident::frontend::onnx_detail
