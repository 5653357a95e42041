// What a public trident::Model holds (a zoo name with its extents, or an ONNX path) and how it
// becomes a graph once the batch and the mode are known: the one place where the library meets
// the front ends (frontend/zoo.h, frontend/onnx).
#pragma once
#include <string>
#include <vector>

#include "frontend/zoo.h"
#include "ir/graph.h"
#include "runtime/weights.h"
#include "trident/model.h"

namespace trident {

struct Model::Impl {
  std::string name;  // the zoo name or the ONNX path
  bool onnx = false;
  frontend::ModelConfig zoo;  // its batch is set when compiling
};

namespace api {

// The name the graph's image input has after build_graph: the trainer feeds "images".
inline constexpr const char* kImagesInput = "images";

struct BuiltModel {
  ir::Graph graph;                   // one input named kImagesInput, its first output the result
  runtime::WeightMap weights;        // an ONNX model's initializers; empty for a zoo model
  std::vector<std::string> notices;  // what the ONNX import changed, one sentence each
};

// The graph of `model` at `batch` (an ONNX model: 0 keeps the file's). For training an ONNX
// model's batchnorms take their training form, and it must be a classifier of image batches.
BuiltModel build_graph(const Model::Impl& model, int64_t batch, bool train);

}  // namespace api
}  // namespace trident
