// trident::Model: a zoo name is checked by building the network once at batch 1 (so an unknown
// name or impossible extents fail where they are given), an ONNX file is read when compiled.
#include <utility>

#include "api/model_impl.h"
#include "core/error.h"
#include "frontend/model_source.h"
#include "frontend/onnx/onnx_import.h"

namespace trident {

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Model Model::zoo(const std::string& name, const ZooOptions& options) {
  auto impl = std::make_shared<Impl>();
  impl->name = name;
  impl->zoo = {1, options.height, options.width, options.channels, options.classes};
  frontend::build_model(name, impl->zoo);  // the unknown-name or misfit sentence
  return Model(std::move(impl));
}

Model Model::onnx(const std::string& path) {
  // Without the importer its stand-in throws the sentence that says how to build with it.
  if (!frontend::onnx_import_available()) frontend::import_onnx(path);
  auto impl = std::make_shared<Impl>();
  impl->name = path;
  impl->onnx = true;
  return Model(std::move(impl));
}

std::vector<ZooModel> Model::zoo_models() {
  std::vector<ZooModel> out;
  for (const frontend::ModelInfo& m : frontend::model_list())
    out.push_back({m.name, m.summary, m.height, m.width, m.channels, m.classes});
  return out;
}

const std::string& Model::name() const { return impl_->name; }

namespace api {

frontend::LoadedModel build_graph(const Model::Impl& model, int64_t batch, bool train) {
  frontend::ModelConfig cfg = model.zoo;
  cfg.batch = batch;
  return frontend::load_model(model.name, cfg, train);
}

}  // namespace api
}  // namespace trident
