// Writing a trident model out as a standard ONNX file, so a network trained here deploys
// wherever ONNX runs: the model graph (as built or imported) with its weights, in ONNX's NCHW
// convention — the input [N, C, H, W] with a symbolic batch, convolution weights OIHW,
// classifier columns in the NCHW flatten order (frontend/torch_layout.h), and
// batchnorm kept as BatchNormalization or folded into the convolution before it.
#pragma once
#include <string>

#include "ir/graph.h"
#include "core/host_tensor.h"

namespace trident::frontend {

struct OnnxExportOptions {
  bool fold_bn = false;  // fold each batchnorm that only a convolution feeds into its weights
  int opset = 17;
  std::string model_name = "trident";
};

// What was written, for the command's report.
struct OnnxExportSummary {
  int nodes = 0, initializers = 0, folded_batchnorms = 0;
};

// Writes `model` with `weights` (trident's layouts; every parameter and running statistic of
// the model) to `path` atomically. An op ONNX export does not cover is an Error naming the
// node and op; so is a missing weight.
OnnxExportSummary export_onnx(const ir::Graph& model, const WeightMap& weights,
                              const OnnxExportOptions& options, const std::string& path);

}  // namespace trident::frontend
