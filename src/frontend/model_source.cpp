// load_model (model_source.h): the zoo's builder or the ONNX importer, and what both give the
// commands and the library alike — the input's name, the model's extents, the file's identity.
#include "frontend/model_source.h"

#include <filesystem>

#include "core/error.h"
#include "frontend/onnx/onnx_import.h"

namespace trident::frontend {

bool is_onnx_path(const std::string& name) { return name.size() > 5 && name.ends_with(".onnx"); }

LoadedModel load_model(const std::string& name, const ModelConfig& extents, bool train, MemoryBudget* budget) {
  LoadedModel m;
  if (!is_onnx_path(name)) {
    m.graph = build_model(name, extents);  // the unknown-model sentence
    for (const ModelInfo& z : model_list())
      if (z.name == name) m.info = z;
    const ir::Value& input = m.graph.value(m.graph.find_value(kImagesInput));
    m.info.height = input.shape[1];
    m.info.width = input.shape[2];
    m.info.channels = input.shape[3];
    m.info.classes = m.graph.value(m.graph.outputs()[0]).shape.back();
    return m;
  }
  OnnxOptions opt;
  opt.batch = extents.batch;
  opt.train = train;
  opt.budget = budget;
  OnnxImport imp = import_onnx(name, opt);
  const int input = imp.graph.find_value(imp.input_name);
  const Shape in = imp.graph.value(input).shape;
  const bool classifier = in.size() == 4 && imp.graph.outputs().size() == 1 &&
                          imp.graph.value(imp.graph.outputs()[0]).shape.size() == 2;
  if (train && !classifier)
    throw Error("'" + name + "' must take one image batch [N,C,H,W] and give one [N, classes] output to be "
                "trained as a classifier");
  imp.graph.value(input).name = kImagesInput;  // the name the trainer and the library feed
  m.info = {name, "ONNX model", 0, 0, 0, 0};
  if (in.size() == 4) m.info.height = in[1], m.info.width = in[2], m.info.channels = in[3];
  if (classifier) m.info.classes = imp.graph.value(imp.graph.outputs()[0]).shape[1];
  m.graph = std::move(imp.graph);
  m.weights = std::move(imp.weights);
  m.notices = std::move(imp.notices);
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(name, ec);
  m.path = ec ? name : absolute.lexically_normal().string();
  m.file_crc = imp.file_crc;
  return m;
}

}  // namespace trident::frontend
