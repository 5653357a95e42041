// Inference: dropout is the identity, so every `dropout` node goes and its readers read its
// input (PyTorch's eval mode; the ONNX importer drops an inference file's Dropout itself).
#include "passes/pass.h"

namespace trident::passes {

void remove_dropout(ir::Graph& g, PassContext&) {
  std::vector<int> removed;
  for (int nid : g.order()) {
    const ir::Node& n = g.node(nid);
    if (n.op != "dropout") continue;
    g.replace_uses(n.outputs[0], n.inputs[0]);
    removed.push_back(nid);
  }
  if (!removed.empty()) g.remove_from_order(removed);
}

}  // namespace trident::passes
