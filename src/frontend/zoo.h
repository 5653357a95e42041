// The model zoo: networks trident is built and measured on, constructed with the Builder.
// Each model has a default input size; every extent can be overridden (0 keeps the default).
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace trident::frontend {

struct ModelConfig {
  int64_t batch = 1;
  int64_t height = 0, width = 0, channels = 0;  // 0: the model's default
  int64_t classes = 0;
};

struct ModelInfo {
  std::string name;
  std::string summary;
  int64_t height, width, channels, classes;  // defaults
};

const std::vector<ModelInfo>& model_list();
// The name of the default model (the Fashion-MNIST CNN).
std::string default_model();
// Builds a model; the graph's single output is the logits [batch, classes], its inputs
// are "images" [batch, H, W, C]. Unknown names throw an Error listing the known ones.
ir::Graph build_model(const std::string& name, const ModelConfig& cfg);

}  // namespace trident::frontend
