// Reading the file a user passes as --weights: a trident checkpoint or a PyTorch state dict in
// safetensors, told apart by what the file holds (runtime/checkpoint/torch_layout.h), not by
// its name, and returned in trident's layouts for the model about to use them.
#pragma once
#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "runtime/weights.h"

namespace trident::runtime {

struct WeightFile {
  WeightMap weights;    // in trident's layouts
  std::string layout;   // "trident" or "PyTorch state dict", for messages
  int64_t steps = 0;    // a checkpoint's optimizer steps (what PyTorch's num_batches_tracked counts); else 0
};

// Reads `path` for `model` (the model graph as built or imported). Errors name the file.
WeightFile read_weight_file(const std::string& path, const ir::Graph& model);

}  // namespace trident::runtime
