// A model named as users name one — a zoo network, or a PyTorch-exported .onnx file — and the
// graph it becomes at a batch, for training or for inference: the one loader of trident's
// commands (train, export, bench) and of the library's Model. For training, an ONNX model must
// be a classifier of image batches; either kind's input is then the value "images".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "core/memory_budget.h"
#include "frontend/zoo.h"
#include "ir/graph.h"

namespace trident::frontend {

inline constexpr const char* kImagesInput = "images";

struct LoadedModel {
  ir::Graph graph;
  // Its name as given, input extents and class count (a zoo model's after `extents`; an ONNX
  // file's from its input and output).
  ModelInfo info;
  WeightMap weights;                 // an ONNX model's initializers; empty for a zoo model
  std::vector<std::string> notices;  // what the ONNX import changed, one sentence each
  std::string path;                  // an ONNX model's absolute path; "" for a zoo model
  uint32_t file_crc = 0;             // an ONNX file's CRC-32C
};

bool is_onnx_path(const std::string& name);

// `name` at `extents.batch` (an ONNX model: 0 keeps the file's batch); a zoo model's other
// extents override its defaults where not 0. Errors name the model: an unknown zoo name (with the
// list), a file that does not import, an ONNX model that is no classifier when `train`.
// With `budget`, what an ONNX model's external data holds is claimed from it before it is read.
LoadedModel load_model(const std::string& name, const ModelConfig& extents, bool train,
                       MemoryBudget* budget = nullptr);

}  // namespace trident::frontend
