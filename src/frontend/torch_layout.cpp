// The conversions of torch_layout.h. A linear layer's columns follow a flatten when its input
// is a flatten's output, directly or through element-wise ops (relu, dropout): exactly the
// pattern PyTorch's `x.flatten(1)` / `view(N, -1)` exports as, and what the ONNX importer maps.
#include "frontend/torch_layout.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/printable.h"
#include "core/tensor_layout.h"
#include "ir/op_registry.h"

namespace trident::frontend {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The flatten whose NHWC input (H·W > 1) a linear layer's input `v` is, through element-wise
// ops; -1 if none.
int flatten_feeding(const ir::Graph& g, int v) {
  for (int hops = 0; hops < 16; ++hops) {
    const int p = g.value(v).producer;
    if (p < 0) return -1;
    const ir::Node& n = g.node(p);
    if (n.op == "flatten" || n.op == "reshape") {
      const Shape& in = g.value(n.inputs[0]).shape;
      return in.size() == 4 && in[1] * in[2] > 1 && in[3] > 1 ? p : -1;
    }
    if (!ir::OpRegistry::get(n.op).elementwise || n.inputs.empty()) return -1;
    v = n.inputs[0];
  }
  return -1;
}

std::string counter_of(const std::string& bn_weight) {
  const std::string stem = ends_with(bn_weight, ".weight") ? bn_weight.substr(0, bn_weight.size() - 7) : bn_weight;
  return stem + kBatchCounterSuffix;
}

// [K, 1, 1, C] and [K, C] hold the same bytes in the same order: only the shape changes.
HostTensor reshaped(HostTensor t, Shape shape) {
  t.shape = std::move(shape);
  return t;
}

HostTensor converted(const TorchLayout::Conversion& c, const HostTensor& t, bool to_torch) {
  if (c.kind == TorchLayout::Kind::conv_weight) return to_torch ? ohwi_to_oihw(t) : oihw_to_ohwi(t);
  if (c.kind == TorchLayout::Kind::pointwise_linear)
    return to_torch ? reshaped(t, {t.shape.at(0), t.shape.at(3)}) : reshaped(t, {t.shape.at(0), 1, 1, t.shape.at(1)});
  if (c.kind == TorchLayout::Kind::channel_factor) return to_torch ? reshaped(t, c.dims) : reshaped(t, {numel(c.dims)});
  return to_torch ? hwc_columns_to_chw(t, c.C, c.H, c.W) : chw_columns_to_hwc(t, c.C, c.H, c.W);
}

}  // namespace

TorchLayout torch_layout(const ir::Graph& g) {
  TorchLayout layout;
  for (int v = 0; v < g.num_values(); ++v) {
    const ir::Value& val = g.value(v);
    if (val.role == ir::ValueRole::Parameter || val.role == ir::ValueRole::State) layout.model_tensors.push_back(val.name);
  }
  for (int id : g.order()) {
    const ir::Node& n = g.node(id);
    if (n.op == "conv2d" && n.inputs.size() >= 2) {
      const bool linear = n.attrs.i("from_matmul", 0) != 0 && g.value(n.inputs[1]).shape.size() == 4 &&
                          g.value(n.inputs[1]).shape[1] == 1 && g.value(n.inputs[1]).shape[2] == 1;
      layout.conversions[g.value(n.inputs[1]).name] = {linear ? TorchLayout::Kind::pointwise_linear
                                                              : TorchLayout::Kind::conv_weight, 0, 0, 0, {}};
    } else if (n.op == "linear" && n.inputs.size() >= 2) {
      const int flatten = flatten_feeding(g, n.inputs[0]);
      if (flatten < 0) continue;
      const Shape& in = g.value(g.node(flatten).inputs[0]).shape;
      layout.conversions[g.value(n.inputs[1]).name] = {TorchLayout::Kind::flattened_columns, in[3], in[1], in[2], {}};
    } else if (n.op == "mul" && n.inputs.size() == 2 && n.attrs.has("factor_dims")) {
      const ir::Value& f = g.value(n.inputs[1]);
      const Shape dims = n.attrs.ints("factor_dims");
      const bool weight = f.role == ir::ValueRole::Parameter || f.role == ir::ValueRole::State;
      if (weight && f.shape.size() == 1 && numel(dims) == f.shape[0])
        layout.conversions[f.name] = {TorchLayout::Kind::channel_factor, 0, 0, 0, dims};
    } else if (n.op == "batchnorm2d" && n.inputs.size() >= 2) {
      layout.batch_counters.push_back(counter_of(g.value(n.inputs[1]).name));
    }
  }
  return layout;
}

Shape torch_shape(const TorchLayout& layout, const std::string& name, const Shape& shape) {
  const auto it = layout.conversions.find(name);
  if (it == layout.conversions.end()) return shape;
  if (it->second.kind == TorchLayout::Kind::conv_weight && shape.size() == 4) return {shape[0], shape[3], shape[1], shape[2]};
  if (it->second.kind == TorchLayout::Kind::pointwise_linear && shape.size() == 4) return {shape[0], shape[3]};
  if (it->second.kind == TorchLayout::Kind::channel_factor && shape.size() == 1) return it->second.dims;
  return shape;  // a column permutation keeps the matrix's shape
}

HostTensor to_torch_tensor(const TorchLayout& layout, const std::string& name, const HostTensor& t) {
  const auto c = layout.conversions.find(name);
  return c == layout.conversions.end() ? t : converted(c->second, t, true);
}

HostTensor to_onnx_tensor(const TorchLayout& layout, const std::string& name, const HostTensor& t) {
  const auto c = layout.conversions.find(name);
  if (c != layout.conversions.end() && c->second.kind == TorchLayout::Kind::pointwise_linear) {
    // [K, 1, 1, C] holds [K, C] row-major; a MatMul over channels-last features takes [C, K].
    const int64_t K = t.shape.at(0), C = t.shape.at(3);
    const float* f = reinterpret_cast<const float*>(t.data.data());
    const std::vector<float> kc = transpose_2d(std::vector<float>(f, f + K * C), K, C);
    HostTensor out{{C, K}, DType::f32, std::vector<std::byte>(t.data.size())};
    std::memcpy(out.data.data(), kc.data(), out.data.size());
    return out;
  }
  return to_torch_tensor(layout, name, t);
}

WeightMap to_torch_state_dict(const TorchLayout& layout, const WeightMap& weights, int64_t batches_tracked) {
  WeightMap out;
  for (const std::string& name : layout.model_tensors) {
    const auto w = weights.find(name);
    if (w == weights.end()) throw Error("the weights lack the model's tensor " + quoted_name(name));
    out[name] = to_torch_tensor(layout, name, w->second);
  }
  const auto count = static_cast<int32_t>(std::clamp<int64_t>(batches_tracked, 0, INT32_MAX));
  for (const std::string& counter : layout.batch_counters) {
    HostTensor t{{}, DType::i32, std::vector<std::byte>(sizeof count)};
    std::memcpy(t.data.data(), &count, sizeof count);
    out[counter] = std::move(t);
  }
  return out;
}

WeightMap from_torch_state_dict(const TorchLayout& layout, const WeightMap& state_dict, const std::string& file,
                                std::vector<std::string>* unfit) {
  WeightMap out;
  for (const auto& [name, t] : state_dict) {
    if (ends_with(name, kBatchCounterSuffix)) continue;
    const auto c = layout.conversions.find(name);
    if (c == layout.conversions.end()) {
      out[name] = t;
      continue;
    }
    const auto kind = c->second.kind;
    const int64_t features = c->second.C * c->second.H * c->second.W;
    const bool fits = kind == TorchLayout::Kind::conv_weight      ? t.shape.size() == 4
                      : kind == TorchLayout::Kind::pointwise_linear ? t.shape.size() == 2
                      : kind == TorchLayout::Kind::channel_factor   ? t.shape == c->second.dims || t.shape == Shape{numel(c->second.dims)}
                                                                    : t.shape.size() == 2 && t.shape[1] == features;
    if (!fits && unfit) {
      unfit->push_back(name + " " + std::string(dtype_name(t.dtype)) + shape_str(t.shape));
      continue;
    }
    if (!fits)
      throw Error("'" + file + "' (a PyTorch state dict) has " + quoted_name(name) + " of shape " + shape_str(t.shape) +
                  (kind == TorchLayout::Kind::conv_weight        ? ", not a 4-D OIHW convolution weight"
                   : kind == TorchLayout::Kind::pointwise_linear ? ", not the 2-D [out, in] matrix of a linear layer"
                   : kind == TorchLayout::Kind::channel_factor   ? ", not the model's per-channel factor of shape " +
                                                                       shape_str(c->second.dims)
                                                                 : ", not the [out, " + std::to_string(features) +
                                                                       "] matrix the model's flattened features need"));
    out[name] = converted(c->second, t, false);
  }
  return out;
}

}  // namespace trident::frontend
