// Saving and loading a Network's weights as safetensors in trident's layouts, the files
// `trident infer --weights` and `trident train --weights` read. Optimizer state (momentum or moments, the
// loss scale) is the one part a file may lack: an inference network has none, and a training
// network keeps its own.
#include <string>

#include "api/network_impl.h"
#include "core/error.h"
#include "passes/optimizer_kind.h"
#include "runtime/checkpoint/safetensors.h"

namespace trident {

namespace {

bool is_optimizer_state(const std::string& name) {
  return passes::is_optimizer_state_name(name) || name.starts_with("amp.");
}

}  // namespace

void Network::save_weights(const std::string& path) const {
  runtime::write_safetensors(path, impl_->weights_executable().export_weights(), {{"model", impl_->model}});
}

void Network::load_weights(const std::string& path) {
  runtime::Executable& exe = impl_->weights_executable();
  runtime::WeightMap weights = runtime::read_safetensors(path);
  // A training checkpoint read by an inference network: its optimizer state has no place here.
  std::erase_if(weights, [&](const auto& entry) {
    return is_optimizer_state(entry.first) && exe.graph().find_value(entry.first) < 0;
  });
  const ir::Graph& g = exe.graph();
  for (int v = 0; v < g.num_values(); ++v) {
    const ir::Value& value = g.value(v);
    const bool weight = value.role == ir::ValueRole::Parameter || value.role == ir::ValueRole::State;
    if (weight && exe.memory_plan().placement[v].buffer != plan::Buffer::None && !is_optimizer_state(value.name) &&
        !weights.count(value.name))
      throw Error("'" + path + "' lacks the weight '" + value.name + "' of this network");
  }
  try {
    exe.import_weights(weights, false);
  } catch (const Error& e) {
    throw Error("'" + path + "' does not fit this network: " + e.what());
  }
  impl_->eval_current = false;
}

}  // namespace trident
