// A Network's weights in and out: safetensors in trident's layouts (the files `trident infer
// --weights` and `trident train --weights` read), PyTorch state dicts read through the loader the
// command line uses (runtime/checkpoint/weight_file.h, which also skips what a new head does not
// fit), and the model out as ONNX or a state dict, as `trident export` writes them. Optimizer
// state (momentum or moments, the loss scale, dropout's random state) is the one part a file may
// lack: an inference network has none, and a training network keeps its own.
#include <string>

#include "api/network_impl.h"
#include "core/error.h"
#include "frontend/onnx/onnx_export.h"
#include "runtime/checkpoint/safetensors.h"
#include "frontend/torch_layout.h"
#include "runtime/checkpoint/weight_file.h"

namespace trident {

void Network::save_weights(const std::string& path) const {
  const std::lock_guard<std::recursive_mutex> lock(impl_->mutex);
  runtime::write_safetensors(path, impl_->weights_executable().export_weights(), {{"model", impl_->model}});
}

std::vector<std::string> Network::load_weights(const std::string& path, const LoadOptions& options) {
  const std::lock_guard<std::recursive_mutex> lock(impl_->mutex);
  runtime::Executable& exe = impl_->weights_executable();
  const runtime::LoadedWeights w = runtime::load_weight_file(
      path, impl_->model_graph, exe,
      {.model = impl_->model,
       .skip_mismatched = options.skip_mismatched,
       .require_all = true,
       .refuse_non_finite = impl_->trainer != nullptr});
  impl_->eval_current = false;
  if (!w.non_finite.empty())
    impl_->notices.push_back("'" + path + "' holds NaN or infinite values (in '" + w.non_finite +
                             "'); the outputs that depend on them will be NaN");
  return w.skipped;
}

void Network::export_onnx(const std::string& path, const OnnxExportOptions& options) const {
  const std::lock_guard<std::recursive_mutex> lock(impl_->mutex);
  frontend::OnnxExportOptions o;
  o.fold_bn = options.fold_batchnorm;
  o.model_name = impl_->model;
  frontend::export_onnx(impl_->model_graph, impl_->weights_executable().export_weights(), o, path);
}

void Network::export_state_dict(const std::string& path) const {
  const std::lock_guard<std::recursive_mutex> lock(impl_->mutex);
  const frontend::TorchLayout layout = frontend::torch_layout(impl_->model_graph);
  const int64_t steps = impl_->batches_trained;  // num_batches_tracked
  const runtime::WeightMap state =
      frontend::to_torch_state_dict(layout, impl_->weights_executable().export_weights(), steps);
  runtime::write_safetensors(path, state, {{"format", "pt"}});
}

}  // namespace trident
