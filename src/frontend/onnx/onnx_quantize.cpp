// QDQ models: QuantizeLinear and DequantizeLinear, as onnxruntime's and PyTorch's quantizers
// write them. Each pair on an activation means "this tensor passes through an int8 grid": it
// becomes one quantize_dequantize node (f32 in and out, ops/quantize.cpp), which the
// quantize_int8 pass hands to the integer convolution that reads it. A DequantizeLinear of a
// constant (int8 weights with per-channel scales, an int32 bias) is evaluated at import into
// the float tensor it stands for, and a QuantizeLinear of a constant (a float weight quantized in
// the graph) into the integers a DequantizeLinear then reads. The arithmetic is ONNX's:
// q = saturate(round(x / scale) + zero_point), x' = (q − zero_point)·scale.
#include <algorithm>
#include <cmath>

#include "core/printable.h"
#include "frontend/onnx/onnx_detail.h"

namespace trident::frontend::onnx_detail {

namespace {

struct IntRange {
  int64_t lo, hi;
};

// The integer type of a quantized tensor: its zero point's (uint8 when there is none, or the
// output_dtype attribute of opset 21).
IntRange range_of(int onnx_type) {
  return onnx_type == onnx::TensorProto::UINT8 ? IntRange{0, 255} : IntRange{-128, 127};
}

}  // namespace

// The scale and zero point of a QuantizeLinear / DequantizeLinear (inputs 1 and 2), checked.
Importer::QuantParams Importer::quant_params(const onnx::NodeProto& n, int64_t data_rank) const {
  allow_attrs(n, {"axis", "saturate", "block_size", "output_dtype"});
  if (attr_int(n, "block_size", 0) != 0) fail(n, "blocked quantization (block_size) is not supported");
  if (attr_int(n, "saturate", 1) != 1) fail(n, "saturate=0 (float8 only) is not supported");
  QuantParams p;
  const Const& scale = constant_of(n, 1);
  if (!scale.is_float || scale.dims.size() > 1 || scale.numel() < 1)
    fail(n, "scale " + quoted_name(scale.name) + " must be a float32 scalar or 1-D tensor");
  for (float s : scale.f)
    if (!(s > 0) || !std::isfinite(s)) fail(n, "scale " + quoted_name(scale.name) + " holds " + std::to_string(s) + "; it must be positive and finite");
  p.scale = scale.f;
  p.onnx_type = onnx::TensorProto::UINT8;
  const int64_t output_dtype = attr_int(n, "output_dtype", 0);
  if (output_dtype != 0) p.onnx_type = static_cast<int>(output_dtype);
  if (has_input(n, 2)) {
    const Const& zp = constant_of(n, 2);
    if (zp.is_float || zp.numel() != scale.numel() || zp.dims.size() > 1)
      fail(n, "zero point " + quoted_name(zp.name) + " must be an integer tensor of the scale's size");
    p.onnx_type = zp.onnx_type;
    p.zero_point = zp.i;
  } else {
    p.zero_point.assign(p.scale.size(), 0);
  }
  if (p.onnx_type != onnx::TensorProto::UINT8 && p.onnx_type != onnx::TensorProto::INT8 &&
      !(n.op_type() == "DequantizeLinear" && p.onnx_type == onnx::TensorProto::INT32))
    fail(n, "quantizes to element type " + std::to_string(p.onnx_type) + "; trident reads int8 and uint8 (int32 for a bias)");
  if (p.scale.size() > 1) {
    p.axis = attr_int(n, "axis", 1);
    if (p.axis < 0) p.axis += data_rank;
    if (p.axis < 0 || p.axis >= data_rank) fail(n, "axis is outside the tensor's rank");
  }
  return p;
}

void Importer::quantize_linear(const onnx::NodeProto& n) {
  expect_io(n, 2, 3, 1);
  const bool constant = is_const(n.input(0));
  const int64_t rank = constant ? static_cast<int64_t>(constant_of(n, 0).dims.size())
                                : static_cast<int64_t>(out_.graph.value(activation(n, 0)).shape.size());
  QuantParams p = quant_params(n, rank);
  if (p.onnx_type == onnx::TensorProto::INT32) fail(n, "quantizes to int32, which trident does not read");
  const IntRange r = range_of(p.onnx_type);
  if (constant) {  // a float weight quantized in the graph: the integers, for the DequantizeLinear
    const Const& x = constant_of(n, 0);
    if (!x.is_float) fail(n, "input " + quoted_name(x.name) + " must be float32");
    Const q;
    q.name = n.output(0);
    q.dims = x.dims;
    q.onnx_type = p.onnx_type;
    q.i.resize(x.f.size());
    const int64_t inner = p.inner(x.dims), groups = static_cast<int64_t>(p.scale.size());
    for (size_t k = 0; k < x.f.size(); ++k) {
      const size_t c = static_cast<size_t>((static_cast<int64_t>(k) / inner) % groups);
      const double v = std::nearbyint(static_cast<double>(x.f[k]) / p.scale[c]) + static_cast<double>(p.zero_point[c]);
      q.i[k] = static_cast<int64_t>(std::clamp(v, static_cast<double>(r.lo), static_cast<double>(r.hi)));
    }
    consts_[n.output(0)] = std::move(q);
    return;
  }
  if (p.scale.size() != 1) fail(n, "quantizes an activation per axis; trident reads one scale per activation");
  if (p.zero_point[0] < r.lo || p.zero_point[0] > r.hi) fail(n, "its zero point is outside its type's range");
  quantized_[n.output(0)] = {activation(n, 0), p};
}

void Importer::dequantize_linear(const onnx::NodeProto& n) {
  expect_io(n, 2, 3, 1);
  if (const auto q = quantized_.find(n.input(0)); q != quantized_.end()) {
    if (options_.train)
      fail(n, "quantizes an activation: a QDQ model is for inference, and trident does not train through "
              "quantization (train the float model, then quantize it)");
    const QuantParams p = quant_params(n, 0);
    if (p.scale != q->second.params.scale || p.zero_point != q->second.params.zero_point ||
        p.onnx_type != q->second.params.onnx_type)
      fail(n, "dequantizes " + quoted_name(n.input(0)) + " with another scale, zero point or type than its "
              "QuantizeLinear; trident reads QuantizeLinear → DequantizeLinear pairs that agree");
    ir::Attrs a{{"scale", static_cast<double>(p.scale[0])},
                {"unsigned", int64_t{p.onnx_type == onnx::TensorProto::UINT8}},
                {"zero_point", p.zero_point[0]}};
    emit(n, "quantize_dequantize", {q->second.x}, a);
    return;
  }
  if (!is_const(n.input(0))) {
    if (values_.count(n.input(0)))
      fail(n, "dequantizes " + quoted_name(n.input(0)) + ", which no QuantizeLinear made (a QOperator model's integer "
              "tensor?); trident imports QDQ models");
    constant_of(n, 0);  // the sentence for a missing input
  }
  const Const& x = constant_of(n, 0);
  if (x.is_float || (x.onnx_type != onnx::TensorProto::INT8 && x.onnx_type != onnx::TensorProto::UINT8 &&
                     x.onnx_type != onnx::TensorProto::INT32))
    fail(n, "input " + quoted_name(x.name) + " must be an int8, uint8 or int32 tensor");
  QuantParams p = quant_params(n, static_cast<int64_t>(x.dims.size()));
  if (!has_input(n, 2)) p.onnx_type = x.onnx_type;  // no zero point: 0 of the input's type
  if (p.onnx_type != x.onnx_type) fail(n, "its zero point's type differs from its input's");
  if (p.scale.size() > 1 && x.dims[static_cast<size_t>(p.axis)] != static_cast<int64_t>(p.scale.size()))
    fail(n, "has " + std::to_string(p.scale.size()) + " scales for axis " + std::to_string(p.axis) + " of extent " +
                std::to_string(x.dims[static_cast<size_t>(p.axis)]));
  Const f;
  f.name = n.output(0);
  f.dims = x.dims;
  f.is_float = true;
  f.f.resize(x.i.size());
  const int64_t inner = p.inner(x.dims), groups = static_cast<int64_t>(p.scale.size());
  // On trident's weight grid (ops/int8_quant.h): int8, no zero point, and per axis-0 slice a
  // largest magnitude of 127 (or all zero), so its int8 convolution quantizes these very
  // integers again.
  bool on_grid = x.onnx_type == onnx::TensorProto::INT8 && (p.scale.size() == 1 || p.axis == 0) &&
                 std::all_of(p.zero_point.begin(), p.zero_point.end(), [](int64_t z) { return z == 0; });
  std::vector<int64_t> slice_max(x.dims.empty() ? 1 : static_cast<size_t>(x.dims[0]), 0);
  const int64_t per_slice = x.dims.empty() || x.dims[0] == 0 ? 1 : static_cast<int64_t>(x.i.size()) / x.dims[0];
  for (size_t k = 0; k < x.i.size(); ++k) {
    const size_t c = static_cast<size_t>((static_cast<int64_t>(k) / inner) % groups);
    f.f[k] = static_cast<float>(static_cast<double>(x.i[k] - p.zero_point[c]) * p.scale[c]);
    int64_t& m = slice_max[static_cast<size_t>(static_cast<int64_t>(k) / per_slice)];
    m = std::max(m, std::abs(x.i[k]));
  }
  for (int64_t m : slice_max) on_grid = on_grid && (m == 0 || m == 127);
  if (!on_grid && x.onnx_type != onnx::TensorProto::INT32) off_grid_weights_.insert(n.output(0));
  consts_[n.output(0)] = std::move(f);
}

// Conv's weight `w`, if a DequantizeLinear made it on a grid trident's int8 convolution does
// not reproduce: one notice for the whole model.
void Importer::notice_off_grid_weight(const onnx::NodeProto& n, const std::string& w) {
  if (!off_grid_weights_.count(w) || off_grid_noticed_) return;
  off_grid_noticed_ = true;
  out_.notices.push_back("the int8 weights of Conv '" + node_name(n) + "' (and of any other so written) are not on " +
                         "trident's grid (int8 per output channel, no zero point, largest magnitude 127); its int8 " +
                         "convolution quantizes the dequantized weights again on that grid");
}

}  // namespace trident::frontend::onnx_detail
