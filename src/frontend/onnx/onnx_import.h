// ONNX import: reads a PyTorch-exported ONNX model (opsets 13-18) into a trident graph plus
// a WeightMap of its initializers, converted once from NCHW/OIHW to trident's NHWC/OHWI.
// Malformed files throw trident::Error naming the file, node, op type and opset.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "core/memory_budget.h"
#include "ir/graph.h"

namespace trident::frontend {

struct OnnxOptions {
  int64_t batch = 0;  // 0: the model's batch; a symbolic batch dim becomes 1
  // For training (trident train --model FILE.onnx): every BatchNormalization takes its training
  // form (batch statistics, running statistics updated in place), also those of an eval-mode
  // export, and Dropout is an identity (a notice says so).
  bool train = false;
  // Where set, the tensors read from external data files are claimed from it before they are
  // read (core/memory_budget.h).
  MemoryBudget* budget = nullptr;
};

struct OnnxImport {
  ir::Graph graph;  // one input value (NHWC), outputs marked; BN nodes in inference form unless training_mode
  WeightMap weights;           // initializers converted to trident layouts, named as in the ONNX file
  std::string input_name;      // the graph input's value name
  std::vector<std::string> output_names;
  int64_t opset = 0;
  std::vector<std::string> notices;  // what the import changed that a user should know, one sentence each
  uint32_t file_crc = 0;             // CRC-32C of the model file's bytes (a run records it to know the file again)
};

// Tensors kept in external data files are read from the model's folder (and only from there).
OnnxImport import_onnx(const std::string& path, const OnnxOptions& options = {});

// Same as import_onnx, from bytes already in memory (fuzzing, tests); `label` names the
// source in error messages. A model whose tensors keep their data in external files is refused.
OnnxImport import_onnx_from_memory(const void* data, size_t size, const OnnxOptions& options = {},
                                   const std::string& label = "<memory>");

bool onnx_import_available();  // false when built without ONNX support

}  // namespace trident::frontend
