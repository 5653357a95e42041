// read_weight_file: one read, the layout decided from the tensors and metadata, then PyTorch's
// layouts converted (weight_file.h).
#include "runtime/checkpoint/weight_file.h"

#include <cstdlib>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/torch_layout.h"

namespace trident::runtime {

WeightFile read_weight_file(const std::string& path, const ir::Graph& model) {
  Metadata metadata;
  WeightMap weights = read_safetensors(path, &metadata);
  const TorchLayout layout = torch_layout(model);
  if (!is_torch_state_dict(layout, model, weights, metadata)) {
    int64_t steps = 0;
    const auto format = metadata.find("format");
    const auto step = metadata.find("step");
    if (format != metadata.end() && format->second == kCheckpointFormat && step != metadata.end())
      steps = std::strtoll(step->second.c_str(), nullptr, 10);  // load_checkpoint validates it; here only a count
    return {std::move(weights), "trident", steps};
  }
  return {from_torch_state_dict(layout, weights, path), "PyTorch state dict", 0};
}

}  // namespace trident::runtime
