// What a public trident::Model holds (a zoo name with its extents, or an ONNX path) and how it
// becomes a graph once the batch and the mode are known: through the loader the commands use
// (frontend/model_source.h), the one place where the library meets the front ends.
#pragma once
#include <string>
#include <vector>

#include "frontend/model_source.h"
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
inline constexpr const char* kImagesInput = frontend::kImagesInput;

// The graph of `model` at `batch` (an ONNX model: 0 keeps the file's). For training an ONNX
// model's batchnorms take their training form, and it must be a classifier of image batches.
frontend::LoadedModel build_graph(const Model::Impl& model, int64_t batch, bool train);

}  // namespace api
}  // namespace trident
