// A network to compile: a zoo model by name or an ONNX file. A Model is a recipe, not a
// compiled graph: its batch is chosen when it is compiled (trident::Network), so one Model
// serves several batches, modes and devices.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trident/export.h"

namespace trident {

// Extents of a zoo model's input and classifier; 0 keeps the model's default.
struct ZooOptions {
  int64_t height = 0, width = 0, channels = 0;
  int64_t classes = 0;
};

// A zoo model and its default extents.
struct ZooModel {
  std::string name, summary;
  int64_t height = 0, width = 0, channels = 0, classes = 0;
};

class TRIDENT_API Model {
 public:
  // A zoo network ("fmnist_cnn", "resnet_cifar", "resnet18", ...). An unknown name, or extents
  // the network cannot take, is an Error naming them (an unknown name lists the known ones).
  static Model zoo(const std::string& name, const ZooOptions& options = {});
  // A PyTorch-exported ONNX file, read when the model is compiled; its initializers are the
  // weights. In a build without ONNX support this is an Error at once.
  static Model onnx(const std::string& path);
  // The zoo's networks, with their default extents.
  static std::vector<ZooModel> zoo_models();

  // The zoo name or the ONNX file's path.
  const std::string& name() const;

  struct Impl;

 private:
  friend class Network;  // compiles the recipe
  explicit Model(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace trident
