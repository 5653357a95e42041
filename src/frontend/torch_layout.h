// PyTorch's layouts for a model's weights, so weights move between trident and PyTorch (a
// state dict in safetensors) and out to ONNX: convolution weights OIHW instead of OHWI,
// classifier columns in the NCHW flatten order where a linear layer reads a flattened feature
// map, a per-pixel linear layer (an nn.Linear over channels-last features, which trident runs as
// a 1×1 convolution) as PyTorch's [out, in] matrix, a per-channel factor in the shape the model
// declared it (ConvNeXt's layer scale, [C, 1, 1]), and a num_batches_tracked counter beside
// every batchnorm. Which tensor needs which
// conversion follows from the model graph (the convolution that reads it, the flatten that
// feeds the linear layer), never from a tensor's name or a file's extension.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "core/host_tensor.h"

namespace trident::frontend {

// The name of the batch counter PyTorch keeps beside a batchnorm: "<bn>.num_batches_tracked".
inline constexpr const char* kBatchCounterSuffix = ".num_batches_tracked";

struct TorchLayout {
  // pointwise_linear: a 1×1 convolution imported from a MatMul over channels-last features
  // (attribute from_matmul); [K, 1, 1, C] in trident, nn.Linear's [K, C] in a state dict, and
  // in ONNX the [C, K] weight of a MatMul over channels-last features, as PyTorch exports it. channel_factor: the [C] factor of a per-channel
  // mul that the imported model declared in another shape of C values (attribute factor_dims,
  // e.g. [C, 1, 1]); that shape in a state dict and in ONNX, the same bytes.
  enum class Kind { conv_weight, flattened_columns, pointwise_linear, channel_factor };
  struct Conversion {
    Kind kind = Kind::conv_weight;
    int64_t C = 0, H = 0, W = 0;  // flattened_columns: the feature map the linear layer reads
    Shape dims;                   // channel_factor: PyTorch's shape
  };
  std::map<std::string, Conversion> conversions;  // by tensor name; others are the same in both
  std::vector<std::string> model_tensors;         // the model's parameters and running statistics
  std::vector<std::string> batch_counters;        // "<bn>.num_batches_tracked", one per batchnorm
};

// The conversions of `model` (a model graph as built or imported, before the compile passes).
TorchLayout torch_layout(const ir::Graph& model);

// trident's tensors of the model (a checkpoint's or an executable's; momentum buffers and
// other extra tensors are left out) as a PyTorch state dict: every model tensor in PyTorch's
// layout, and each batchnorm's counter set to `batches_tracked` (I32; load_state_dict copies
// it into PyTorch's int64 buffer). An Error names a missing model tensor.
WeightMap to_torch_state_dict(const TorchLayout& layout, const WeightMap& weights, int64_t batches_tracked);

// A PyTorch state dict (from `file`) in trident's layouts; the batch counters are dropped and
// tensors the layout does not convert pass through for the importer to check. An Error names
// a tensor whose shape fits neither layout, or, with `unfit`, it is left out and named there.
WeightMap from_torch_state_dict(const TorchLayout& layout, const WeightMap& state_dict, const std::string& file,
                                std::vector<std::string>* unfit = nullptr);

// One model tensor `name` (trident's layout) in PyTorch's layout; unchanged if it has no conversion.
HostTensor to_torch_tensor(const TorchLayout& layout, const std::string& name, const HostTensor& t);

// One model tensor `name` in the layout of trident's ONNX export: as to_torch_tensor, except
// pointwise_linear weights are the [C, K] matrix of the MatMul the export writes for them.
HostTensor to_onnx_tensor(const TorchLayout& layout, const std::string& name, const HostTensor& t);

// The PyTorch shape of a model tensor whose trident shape is `shape`.
Shape torch_shape(const TorchLayout& layout, const std::string& name, const Shape& shape);

}  // namespace trident::frontend
