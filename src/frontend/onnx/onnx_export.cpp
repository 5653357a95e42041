// The ONNX writer of onnx_export.h. One ONNX node (or two, for a folded pair) per trident node
// of the model graph, in the graph's order; activations keep trident's value names. trident's
// NHWC tensors are ONNX's NCHW tensors, so only attributes that name an axis (concat, the Slice
// of a channel_slice, the Pad of a pad2d) and the weights whose layout depends on it
// (torch_layout.h) change on the way out.
#include "frontend/onnx/onnx_export.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/host_tensor.h"
#include "core/printable.h"
#include "core/tensor_layout.h"
#include "frontend/torch_layout.h"
#include "ops/activation.h"
#include "ops/int8_quant.h"
#include "ops/mul_broadcast.h"
#include "ops/window.h"
#include "ops/norm_params.h"

namespace trident::frontend {

namespace {

class Writer {
 public:
  Writer(const ir::Graph& g, const WeightMap& weights, const OnnxExportOptions& opt)
      : g_(g), weights_(weights), opt_(opt), layout_(torch_layout(g)) {
    model_.set_ir_version(8);
    model_.set_producer_name("trident");
    model_.add_opset_import()->set_version(opt.opset);
    graph_ = model_.mutable_graph();
    graph_->set_name(opt.model_name);
  }

  OnnxExportSummary write(const std::string& path) {
    users_ = g_.users();
    for (int v : g_.values_with_role(ir::ValueRole::Input)) add_io(graph_->add_input(), v);
    for (int id : g_.order()) node(g_.node(id));
    for (int v : g_.outputs()) add_io(graph_->add_output(), v);
    std::string bytes;
    if (!model_.SerializeToString(&bytes)) throw Error("the ONNX model could not be serialised");
    write_file_atomically(path, bytes.data(), bytes.size());
    summary_.nodes = graph_->node_size();
    summary_.initializers = graph_->initializer_size();
    return summary_;
  }

 private:
  [[noreturn]] void fail(const ir::Node& n, const std::string& why) const {
    throw Error("cannot export node '" + printable(n.name) + "' (" + n.op + ") to ONNX: " + why);
  }

  const std::string& name(int v) const { return g_.value(v).name; }

  // An input or output: f32, NCHW for 4-D tensors, the batch axis symbolic.
  void add_io(onnx::ValueInfoProto* info, int v) {
    const ir::Value& val = g_.value(v);
    info->set_name(val.name);
    auto* t = info->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    Shape s = val.shape;
    if (s.size() == 4) s = {s[0], s[3], s[1], s[2]};
    for (size_t i = 0; i < s.size(); ++i) {
      auto* d = t->mutable_shape()->add_dim();
      if (i == 0) d->set_dim_param("N");
      else d->set_dim_value(s[i]);
    }
  }

  // The trident tensor of a parameter or state, as f32.
  HostTensor weight(const ir::Node& n, int v) const {
    const auto it = weights_.find(name(v));
    if (it == weights_.end()) fail(n, "the weights lack " + quoted_name(name(v)));
    if (it->second.shape != g_.value(v).shape)
      fail(n, quoted_name(name(v)) + " has shape " + shape_str(it->second.shape) + ", the model " +
                  shape_str(g_.value(v).shape));
    return to_f32(it->second, name(v));
  }

  void initializer(const std::string& nm, const HostTensor& t, const Shape& shape) {
    auto* init = graph_->add_initializer();
    init->set_name(nm);
    init->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) init->add_dims(d);
    init->set_raw_data(t.data.data(), t.data.size());
  }
  // A parameter in its ONNX layout (conv weights OIHW, flattened columns NCHW-ordered), once.
  const std::string& param(const ir::Node& n, int v) {
    if (written_.insert(v).second) {
      const HostTensor out = to_onnx_tensor(layout_, name(v), weight(n, v));
      initializer(name(v), out, out.shape);
    }
    return name(v);
  }
  std::string constant(const std::string& nm, const std::vector<float>& values, const Shape& shape) {
    HostTensor t{shape, DType::f32, std::vector<std::byte>(values.size() * sizeof(float))};
    std::memcpy(t.data.data(), values.data(), t.data.size());
    initializer(nm, t, shape);
    return nm;
  }

  // GELU at opset 17 (ONNX's Gelu op is opset 20), as PyTorch's TorchScript exporter writes it:
  // x·(1 + erf(x/√2))/2, or the tanh form x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2.
  void gelu(const ir::Node& n, ops::ActivationFn fn, const std::string& out) {
    const std::string x = name(n.inputs[0]), p = out + ".gelu";
    const std::string one = constant(p + ".one", {1.f}, {}), half = constant(p + ".half", {0.5f}, {});
    std::string inner = x;
    if (fn == ops::ActivationFn::gelu) {
      emit(n, "Mul", {x, constant(p + ".sqrt_half", {static_cast<float>(ops::kSqrtHalf)}, {})}, {p + ".scaled"}, ".scaled");
      emit(n, "Erf", {p + ".scaled"}, {p + ".erf"}, ".erf");
      inner = p + ".erf";
    } else {
      emit(n, "Mul", {x, x}, {p + ".square"}, ".square");
      emit(n, "Mul", {p + ".square", x}, {p + ".cube"}, ".cube");
      emit(n, "Mul", {p + ".cube", constant(p + ".cubic", {static_cast<float>(ops::kGeluCubic)}, {})}, {p + ".cubic_term"},
           ".cubic_term");
      emit(n, "Add", {x, p + ".cubic_term"}, {p + ".sum"}, ".sum");
      emit(n, "Mul", {p + ".sum", constant(p + ".sqrt_two_over_pi", {static_cast<float>(ops::kSqrtTwoOverPi)}, {})},
           {p + ".scaled"}, ".scaled");
      emit(n, "Tanh", {p + ".scaled"}, {p + ".tanh"}, ".tanh");
      inner = p + ".tanh";
    }
    emit(n, "Add", {inner, one}, {p + ".plus_one"}, ".plus_one");
    emit(n, "Mul", {x, p + ".plus_one"}, {p + ".product"}, ".product");
    emit(n, "Mul", {p + ".product", half}, {out});
  }

  std::string int_constant(const std::string& nm, const std::vector<int64_t>& values) {
    auto* init = graph_->add_initializer();
    init->set_name(nm);
    init->set_data_type(onnx::TensorProto::INT64);
    init->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) init->add_int64_data(v);
    return nm;
  }

  onnx::NodeProto* emit(const ir::Node& n, const std::string& op, const std::vector<std::string>& in,
                        const std::vector<std::string>& out, const std::string& suffix = "") {
    auto* p = graph_->add_node();
    p->set_op_type(op);
    p->set_name(n.name + suffix);
    for (const auto& s : in) p->add_input(s);
    for (const auto& s : out) p->add_output(s);
    return p;
  }
  static void ints(onnx::NodeProto* p, const char* key, const std::vector<int64_t>& v) {
    auto* a = p->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void integer(onnx::NodeProto* p, const char* key, int64_t v) {
    auto* a = p->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void real(onnx::NodeProto* p, const char* key, double v) {
    auto* a = p->add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(v));
  }
  static void window(onnx::NodeProto* p, const ops::Window& w, bool conv) {
    ints(p, "kernel_shape", {w.kernel.h, w.kernel.w});
    ints(p, "strides", {w.stride.h, w.stride.w});
    ints(p, "pads", {w.pad.h, w.pad.w, w.pad.h, w.pad.w});
    if (conv) {
      ints(p, "dilations", {w.dil.h, w.dil.w});
      integer(p, "group", w.groups);
    }
  }

  // The batchnorm (inference form) that reads `conv_out` when it is the convolution's only
  // reader and folding is on; -1 otherwise.
  int foldable_bn(int conv_out) const {
    if (!opt_.fold_bn || users_[conv_out].size() != 1) return -1;
    for (int v : g_.outputs())
      if (v == conv_out) return -1;
    const ir::Node& bn = g_.node(users_[conv_out][0]);
    return bn.op == "batchnorm2d" && bn.inputs[0] == conv_out ? bn.id : -1;
  }

  // Whether the convolution reads a quantize_dequantize pair (`trident quantize`'s form): its
  // weights then go out as int8 too.
  bool reads_pair(const ir::Node& n) const {
    const int p = g_.value(n.inputs[0]).producer;
    return p >= 0 && g_.node(p).op == "quantize_dequantize" && g_.node(p).attrs.i("per_channel", 0) == 0;
  }

  std::string byte_constant(const std::string& nm, int64_t value, bool is_unsigned) {
    auto* init = graph_->add_initializer();
    init->set_name(nm);
    init->set_data_type(is_unsigned ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8);
    const char byte = static_cast<char>(is_unsigned ? static_cast<uint8_t>(value) : static_cast<uint8_t>(static_cast<int8_t>(value)));
    init->set_raw_data(std::string(1, byte));
    return nm;
  }

  // OIHW weights on trident's int8 grid (ops/int8_quant.h: per output channel, ±127) as an
  // int8 initializer, and the DequantizeLinear (axis 0) that reads them back; returns its output.
  std::string int8_weights(const ir::Node& n, const std::string& nm, const HostTensor& oihw) {
    const int64_t K = oihw.shape[0], per = numel(oihw.shape) / K;
    const float* w = reinterpret_cast<const float*>(oihw.data.data());
    std::string q(static_cast<size_t>(K * per), '\0');
    std::vector<float> scales(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) {
      float absmax = 0;
      for (int64_t i = 0; i < per; ++i) absmax = std::max(absmax, std::fabs(w[k * per + i]));
      scales[k] = ops::int8_scale(absmax, false);
      const float inverse = 1.0f / scales[k];
      for (int64_t i = 0; i < per; ++i)
        q[static_cast<size_t>(k * per + i)] = static_cast<char>(static_cast<int8_t>(ops::int8_level(w[k * per + i], inverse, ops::kWeightGrid)));
    }
    auto* init = graph_->add_initializer();
    init->set_name(nm + ".int8");
    init->set_data_type(onnx::TensorProto::INT8);
    for (int64_t d : oihw.shape) init->add_dims(d);
    init->set_raw_data(q);
    constant(nm + ".scale", scales, {K});
    auto* zero = graph_->add_initializer();
    zero->set_name(nm + ".zero_point");
    zero->set_data_type(onnx::TensorProto::INT8);
    zero->add_dims(K);
    zero->set_raw_data(std::string(static_cast<size_t>(K), '\0'));
    integer(emit(n, "DequantizeLinear", {nm + ".int8", nm + ".scale", nm + ".zero_point"}, {nm}, ".dequantize_weight"),
            "axis", 0);
    return nm;
  }

  // A pair on an activation: QuantizeLinear → DequantizeLinear with its scale and zero point.
  void pair(const ir::Node& n, const std::string& out) {
    if (n.attrs.i("per_channel", 0) != 0) fail(n, "a per-channel pair exists only inside a decomposition");
    const bool is_unsigned = n.attrs.i("unsigned", 0) != 0;
    const std::string q = out + ".quantized";
    const std::string scale = constant(q + ".scale", {static_cast<float>(n.attrs.f("scale"))}, {});
    const std::string zero = byte_constant(q + ".zero_point", n.attrs.i("zero_point", 0), is_unsigned);
    emit(n, "QuantizeLinear", {name(n.inputs[0]), scale, zero}, {q}, ".quantize");
    emit(n, "DequantizeLinear", {q, scale, zero}, {out}, ".dequantize");
  }

  void conv(const ir::Node& n) {
    const Shape& w = g_.value(n.inputs[1]).shape;
    const ops::Window win = ops::conv_window(n.attrs, {w[1], w[2]});
    const int bn = foldable_bn(n.outputs[0]);
    if (bn < 0 && n.attrs.i("from_matmul", 0) != 0) {
      // A per-pixel linear layer, as it was imported: NCHW to channels-last, MatMul [C, K] (+ its
      // bias) and back, so a state dict of the imported model fits the export and vice versa.
      const std::string out = name(n.outputs[0]), last = out + ".channels_last", product = out + ".matmul";
      ints(emit(n, "Transpose", {name(n.inputs[0])}, {last}, ".to_channels_last"), "perm", {0, 2, 3, 1});
      emit(n, "MatMul", {last, param(n, n.inputs[1])}, {product}, ".matmul");
      std::string result = product;
      if (n.inputs.size() > 2) {
        result = out + ".biased";
        emit(n, "Add", {product, param(n, n.inputs[2])}, {result}, ".bias");
      }
      ints(emit(n, "Transpose", {result}, {out}), "perm", {0, 3, 1, 2});
      return;
    }
    if (bn < 0) {
      std::vector<std::string> in{name(n.inputs[0]), reads_pair(n) ? int8_weights(n, n.name + ".weight",
                                                                                  to_onnx_tensor(layout_, name(n.inputs[1]), weight(n, n.inputs[1])))
                                                                    : param(n, n.inputs[1])};
      if (n.inputs.size() > 2) in.push_back(param(n, n.inputs[2]));
      window(emit(n, "Conv", in, {name(n.outputs[0])}), win, true);
      return;
    }
    // y = γ·(conv + b − μ)/√(σ² + ε) + β: the weights scaled per output channel, a new bias.
    const ir::Node& b = g_.node(bn);
    const int64_t K = w[0], per = w[1] * w[2] * w[3];
    const HostTensor wt = weight(n, n.inputs[1]), gamma = weight(b, b.inputs[1]), beta = weight(b, b.inputs[2]),
                     mean = weight(b, b.inputs[3]), var = weight(b, b.inputs[4]);
    std::vector<float> bias(K, 0.f);
    if (n.inputs.size() > 2) std::memcpy(bias.data(), weight(n, n.inputs[2]).data.data(), K * sizeof(float));
    HostTensor scaled = wt;
    auto f = [](const HostTensor& t) { return reinterpret_cast<const float*>(t.data.data()); };
    float* sw = reinterpret_cast<float*>(scaled.data.data());
    const double eps = ops::NormParams::of(b).eps;
    for (int64_t k = 0; k < K; ++k) {
      const double s = f(gamma)[k] / std::sqrt(static_cast<double>(f(var)[k]) + eps);
      for (int64_t i = 0; i < per; ++i) sw[k * per + i] = static_cast<float>(f(wt)[k * per + i] * s);
      bias[k] = static_cast<float>((bias[k] - f(mean)[k]) * s + f(beta)[k]);
    }
    const HostTensor oihw = ohwi_to_oihw(scaled);
    std::string weight_name = n.name + ".folded_weight";
    if (reads_pair(n)) weight_name = int8_weights(n, weight_name, oihw);
    else initializer(weight_name, oihw, oihw.shape);
    const std::string bias_name = constant(n.name + ".folded_bias", bias, {K});
    window(emit(n, "Conv", {name(n.inputs[0]), weight_name, bias_name}, {name(b.outputs[0])}), win, true);
    folded_.insert(bn);
    ++summary_.folded_batchnorms;
  }

  void node(const ir::Node& n) {
    if (folded_.count(n.id)) return;
    const std::string out = n.outputs.empty() ? "" : name(n.outputs[0]);
    const Shape& x = n.inputs.empty() ? Shape{} : g_.value(n.inputs[0]).shape;
    if (n.op == "conv2d") return conv(n);
    if (n.op == "batchnorm2d") {
      real(emit(n, "BatchNormalization",
                {name(n.inputs[0]), param(n, n.inputs[1]), param(n, n.inputs[2]), param(n, n.inputs[3]),
                 param(n, n.inputs[4])},
                {out}),
           "epsilon", ops::NormParams::of(n).eps);
      return;
    }
    if (n.op == "relu") return void(emit(n, "Relu", {name(n.inputs[0])}, {out}));
    if (n.op == "quantize_dequantize") return pair(n, out);
    if (n.op == "layernorm") {  // over channels: NCHW permuted to channels-last and back, as ConvNeXt does
      const std::vector<std::string> params{param(n, n.inputs[1]), param(n, n.inputs[2])};
      if (x.size() != 4) {
        real(emit(n, "LayerNormalization", {name(n.inputs[0]), params[0], params[1]}, {out}), "epsilon",
             ops::NormParams::of(n).eps);
        return;
      }
      const std::string last = out + ".channels_last", normed = out + ".normalised";
      ints(emit(n, "Transpose", {name(n.inputs[0])}, {last}, ".to_channels_last"), "perm", {0, 2, 3, 1});
      real(emit(n, "LayerNormalization", {last, params[0], params[1]}, {normed}, ".layernorm"), "epsilon",
           ops::NormParams::of(n).eps);
      return void(ints(emit(n, "Transpose", {normed}, {out}), "perm", {0, 3, 1, 2}));
    }
    if (n.op == "add") return void(emit(n, "Add", {name(n.inputs[0]), name(n.inputs[1])}, {out}));
    if (n.op == "mul") {
      const Shape& b = g_.value(n.inputs[1]).shape;
      std::string rhs = name(n.inputs[1]);
      const auto declared = layout_.conversions.find(rhs);
      if (declared != layout_.conversions.end() && declared->second.kind == TorchLayout::Kind::channel_factor)
        return void(emit(n, "Mul", {name(n.inputs[0]), param(n, n.inputs[1])}, {out}));  // in the shape it came in
      if (ops::mul_broadcast(x, b) == ops::MulBroadcast::channel) {  // one per channel: [C, 1, 1] in NCHW
        const ir::ValueRole role = g_.value(n.inputs[1]).role;
        if (role != ir::ValueRole::Parameter && role != ir::ValueRole::State)
          fail(n, "a per-channel factor that is not a parameter");
        const HostTensor t = weight(n, n.inputs[1]);
        const std::vector<float> v(reinterpret_cast<const float*>(t.data.data()),
                                   reinterpret_cast<const float*>(t.data.data()) + numel(b));
        rhs = constant(rhs + ".per_channel", v, x.size() == 4 ? Shape{b[0], 1, 1} : b);
      }
      return void(emit(n, "Mul", {name(n.inputs[0]), rhs}, {out}));
    }
    if (n.op == "activation") {
      const ops::ActivationParams p = ops::activation_params(n.attrs);
      if (p.fn == ops::ActivationFn::silu) {  // x·sigmoid(x), as PyTorch exports SiLU
        const std::string s = out + ".sigmoid";
        emit(n, "Sigmoid", {name(n.inputs[0])}, {s}, ".sigmoid");
        return void(emit(n, "Mul", {name(n.inputs[0]), s}, {out}));
      }
      if (p.fn == ops::ActivationFn::hardsigmoid) {
        auto* h = emit(n, "HardSigmoid", {name(n.inputs[0])}, {out});
        real(h, "alpha", p.alpha);
        real(h, "beta", p.beta);
        return;
      }
      if (p.fn == ops::ActivationFn::gelu || p.fn == ops::ActivationFn::gelu_tanh) return gelu(n, p.fn, out);
      if (p.fn != ops::ActivationFn::sigmoid && p.fn != ops::ActivationFn::hardswish)
        fail(n, std::string("activation ") + ops::activation_fn_name(p.fn) + " has no ONNX form here");
      return void(emit(n, p.fn == ops::ActivationFn::sigmoid ? "Sigmoid" : "HardSwish", {name(n.inputs[0])}, {out}));
    }
    if (n.op == "clip") {
      const double lo = n.attrs.f("min", -INFINITY), hi = n.attrs.f("max", INFINITY);
      const std::string lo_name = constant(n.name + ".min", {static_cast<float>(lo)}, {});
      const std::string hi_name = constant(n.name + ".max", {static_cast<float>(hi)}, {});
      return void(emit(n, "Clip", {name(n.inputs[0]), lo_name, hi_name}, {out}));
    }
    if (n.op == "maxpool2d" || n.op == "avgpool2d") {
      const ops::Window w = ops::pool_window(n.attrs);
      const bool avg = n.op == "avgpool2d";
      auto* p = emit(n, avg ? "AveragePool" : "MaxPool", {name(n.inputs[0])}, {out});
      window(p, w, false);
      if (avg) integer(p, "count_include_pad", w.count_include_pad);
      if (w.ceil_mode) integer(p, "ceil_mode", 1);
      return;
    }
    if (n.op == "global_avgpool") return void(emit(n, "GlobalAveragePool", {name(n.inputs[0])}, {out}));
    if (n.op == "dropout") {  // Dropout with its ratio and no training_mode: the identity of inference
      const std::string ratio = constant(n.name + ".ratio", {static_cast<float>(n.attrs.f("p"))}, {});
      return void(emit(n, "Dropout", {name(n.inputs[0]), ratio}, {out}));
    }
    if (n.op == "flatten") return void(integer(emit(n, "Flatten", {name(n.inputs[0])}, {out}), "axis", 1));
    if (n.op == "linear") {
      std::vector<std::string> in{name(n.inputs[0]), param(n, n.inputs[1])};
      if (n.inputs.size() > 2) in.push_back(param(n, n.inputs[2]));
      return void(integer(emit(n, "Gemm", in, {out}), "transB", 1));
    }
    if (n.op == "channel_shuffle" && x.size() == 4) {  // as PyTorch exports it: view, transpose, view
      const int64_t g = n.attrs.i("groups"), C = x[3], H = x[1], W = x[2];
      const std::string split = out + ".split", swapped = out + ".transposed";
      emit(n, "Reshape", {name(n.inputs[0]), int_constant(n.name + ".split_shape", {-1, g, C / g, H, W})}, {split},
           ".split");
      ints(emit(n, "Transpose", {split}, {swapped}, ".transpose"), "perm", {0, 2, 1, 3, 4});
      return void(emit(n, "Reshape", {swapped, int_constant(n.name + ".merge_shape", {-1, C, H, W})}, {out}));
    }
    if (n.op == "concat") {
      std::vector<std::string> in;
      for (int v : n.inputs) in.push_back(name(v));
      return void(integer(emit(n, "Concat", in, {out}), "axis", x.size() == 4 ? 1 : static_cast<int64_t>(x.size()) - 1));
    }
    if (n.op == "pad2d") {  // Pad in constant mode; ONNX's pads are [begins..., ends...] over N, C, H, W
      const std::vector<int64_t>& p = n.attrs.ints("pads");
      const std::string pads = int_constant(n.name + ".pads", {0, 0, p[0], p[1], 0, 0, p[2], p[3]});
      const std::string value = constant(n.name + ".value", {static_cast<float>(n.attrs.f("value", 0.0))}, {});
      return void(emit(n, "Pad", {name(n.inputs[0]), pads, value}, {out}));
    }
    if (n.op == "channel_slice") {
      const int64_t start = n.attrs.i("start", 0), c = n.attrs.i("channels", 0);
      if (start < 0 || start + c > x.back()) fail(n, "a channel slice whose window reaches past the input's channels");
      const int64_t axis = x.size() == 4 ? 1 : static_cast<int64_t>(x.size()) - 1;
      return void(emit(n, "Slice",
                       {name(n.inputs[0]), int_constant(n.name + ".starts", {start}),
                        int_constant(n.name + ".ends", {start + c}), int_constant(n.name + ".axes", {axis})},
                       {out}));
    }
    fail(n, "ONNX export covers conv2d, batchnorm2d, relu, the activations, add, mul, clip, max and average "
            "pooling, global average pooling, flatten, linear, dropout, concat, pad2d, channel_slice, the "
            "channel shuffle of 4-D tensors and quantize_dequantize pairs");
  }

  const ir::Graph& g_;
  const WeightMap& weights_;
  OnnxExportOptions opt_;
  TorchLayout layout_;
  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
  std::vector<std::vector<int>> users_;
  std::set<int> written_, folded_;
  OnnxExportSummary summary_;
};

}  // namespace

OnnxExportSummary export_onnx(const ir::Graph& model, const WeightMap& weights,
                              const OnnxExportOptions& options, const std::string& path) {
  Writer w(model, weights, options);
  return w.write(path);
}

}  // namespace trident::frontend
