// Inference canonicalisation: every batchnorm2d switches to its running statistics and
// drops the training-only outputs (saved statistics, running-statistics updates).
#include "core/error.h"
#include "passes/pass.h"

namespace trident::passes {

void set_batchnorm_mode(ir::Graph& g, PassContext&) {
  auto users = g.users();
  for (int nid : g.order()) {
    ir::Node& n = g.node(nid);
    if (n.op != "batchnorm2d" || !n.attrs.i("training", 1)) continue;
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (!users[n.outputs[i]].empty())
        throw Error("batchnorm '" + n.name + "' has its training statistics read by node '" +
                    g.node(users[n.outputs[i]][0]).name + "', so it cannot run in inference mode");
    n.attrs.set("training", int64_t{0});
    n.outputs.resize(1);
  }
}

}  // namespace trident::passes
