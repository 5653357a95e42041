// read_weight_file: one read, the layout decided from the tensors and metadata, then PyTorch's
// layouts converted; load_weight_file: what of it fits, into an executable (weight_file.h).
#include "runtime/checkpoint/weight_file.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/printable.h"
#include "passes/optimizer_kind.h"
#include "ops/dropout.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"

namespace trident::runtime {

bool is_torch_state_dict(const frontend::TorchLayout& layout, const ir::Graph& model, const WeightMap& weights,
                         const Metadata& metadata) {
  const auto format = metadata.find("format");
  if (format != metadata.end() && format->second == kCheckpointFormat) return false;
  if (format != metadata.end() && format->second == "pt") return true;
  for (const auto& [name, t] : weights)
    if (name.ends_with(frontend::kBatchCounterSuffix)) return true;
  bool only_trident = false;
  for (const auto& [name, conv] : layout.conversions) {
    const auto w = weights.find(name);
    const int v = model.find_value(name);
    if (w == weights.end() || v < 0) continue;
    const Shape& ours = model.value(v).shape;
    const bool fits_torch = w->second.shape == frontend::torch_shape(layout, name, ours);
    const bool fits_ours = w->second.shape == ours;
    if (fits_torch && !fits_ours) return true;
    only_trident = only_trident || (fits_ours && !fits_torch);
  }
  return !only_trident;
}

bool is_training_state(const std::string& name) {
  return passes::is_optimizer_state_name(name) || name.starts_with("amp.") || name == ops::kDropoutStateName;
}

std::string non_finite_tensor(const WeightMap& weights) {
  for (const auto& [name, t] : weights) {
    const int64_t n = numel(t.shape);
    bool bad = false;
    if (t.dtype == DType::f32)
      for (int64_t i = 0; i < n && !bad; ++i) bad = !std::isfinite(reinterpret_cast<const float*>(t.data.data())[i]);
    else if (t.dtype == DType::f64)
      for (int64_t i = 0; i < n && !bad; ++i) bad = !std::isfinite(reinterpret_cast<const double*>(t.data.data())[i]);
    else if (t.dtype == DType::f16 || t.dtype == DType::bf16)
      for (int64_t i = 0; i < n && !bad; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data.data() + i * 2, 2);
        bad = t.dtype == DType::f16 ? (h & 0x7C00) == 0x7C00 : (h & 0x7F80) == 0x7F80;  // all-ones exponent
      }
    if (bad) return name;
  }
  return "";
}

namespace {

std::string typed(const HostTensor& t) { return std::string(dtype_name(t.dtype)) + shape_str(t.shape); }

}  // namespace

WeightFile read_weight_file(const std::string& path, const ir::Graph& model, bool skip_unfit) {
  Metadata metadata;
  WeightMap weights = read_safetensors(path, &metadata);
  const frontend::TorchLayout layout = frontend::torch_layout(model);
  if (!is_torch_state_dict(layout, model, weights, metadata)) {
    int64_t steps = 0;
    const auto format = metadata.find("format");
    const auto step = metadata.find("step");
    if (format != metadata.end() && format->second == kCheckpointFormat && step != metadata.end())
      steps = std::strtoll(step->second.c_str(), nullptr, 10);  // load_checkpoint validates it; here only a count
    return {std::move(weights), "trident", steps, {}};
  }
  WeightFile f;
  f.layout = "PyTorch state dict";
  f.weights = frontend::from_torch_state_dict(layout, weights, path, skip_unfit ? &f.unfit : nullptr);
  return f;
}

LoadedWeights load_weight_file(const std::string& path, const ir::Graph& model, Executable& exe, const WeightLoad& how) {
  WeightFile file = read_weight_file(path, model, how.skip_mismatched);
  LoadedWeights out;
  out.layout = file.layout;
  out.steps = file.steps;
  for (std::string& u : file.unfit) out.skipped.push_back(u + " (no layout of the model's fits it)");
  const ir::Graph& g = exe.graph();
  for (auto it = file.weights.begin(); it != file.weights.end();) {
    const std::string& name = it->first;
    const int id = g.find_value(name);
    const bool weight = id >= 0 && (g.value(id).role == ir::ValueRole::Parameter || g.value(id).role == ir::ValueRole::State);
    std::string misfit;
    if (!weight && is_training_state(name)) {
      it = file.weights.erase(it);  // another optimizer's state, or none here: no place for it
      continue;
    }
    if (!weight) misfit = name + " (not in the model)";
    else if (it->second.shape != g.value(id).shape || it->second.dtype != g.value(id).dtype)
      misfit = name + " " + typed(it->second) + " (the model's " + std::string(dtype_name(g.value(id).dtype)) +
               shape_str(g.value(id).shape) + ")";
    if (misfit.empty()) {
      ++it;
      continue;
    }
    if (how.skip_mismatched && is_training_state(name)) {  // a skipped tensor's momentum goes with it, unsaid
      it = file.weights.erase(it);
      continue;
    }
    if (!how.skip_mismatched)
      throw Error("'" + path + "' (" + file.layout + ") does not fit model '" + how.model + "': it holds " + misfit +
                  "; to fine-tune with a new head, skip what does not fit (--skip-mismatched, "
                  "load_weights(..., skip_mismatched=True))");
    out.skipped.push_back(misfit);
    it = file.weights.erase(it);
  }
  if (how.require_all)
    for (int v = 0; v < g.num_values(); ++v) {
      const ir::Value& value = g.value(v);
      const bool weight = value.role == ir::ValueRole::Parameter || value.role == ir::ValueRole::State;
      if (!weight || exe.memory_plan().placement[v].buffer == plan::Buffer::None || is_training_state(value.name) ||
          file.weights.count(value.name))
        continue;
      bool skipped = false;
      for (const std::string& s : out.skipped) skipped = skipped || s.rfind(value.name + " ", 0) == 0;
      if (!skipped) throw Error("'" + path + "' lacks the weight '" + value.name + "' of this network");
    }
  out.non_finite = non_finite_tensor(file.weights);
  if (how.refuse_non_finite && !out.non_finite.empty())
    throw Error("'" + path + "' holds NaN or infinite values (in '" + out.non_finite +
                "'); training from them can only give NaN");
  try {
    out.loaded = exe.import_weights(file.weights, false);
  } catch (const Error& e) {
    throw Error("'" + path + "' does not fit model '" + how.model + "': " + e.what());
  }
  if (out.loaded == 0) throw Error("'" + path + "' holds no tensor this network uses");
  return out;
}

std::string skipped_sentence(const std::string& path, const std::vector<std::string>& skipped) {
  std::string s = "skipped " + std::to_string(skipped.size()) + " tensor" + (skipped.size() == 1 ? "" : "s") + " of " +
                  quoted_name(path) + " that do" + (skipped.size() == 1 ? "es" : "") +
                  " not fit the model, which keep their initial values: ";
  for (size_t i = 0; i < skipped.size() && i < 8; ++i) s += (i ? ", " : "") + skipped[i];
  if (skipped.size() > 8) s += " and " + std::to_string(skipped.size() - 8) + " more";
  return s;
}

}  // namespace trident::runtime
