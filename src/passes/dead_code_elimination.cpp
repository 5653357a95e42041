// Removes nodes whose outputs nobody reads. Roots are the graph outputs and nodes with side
// effects (in-place state updates). This is where the first layer's data gradient goes.
#include "ir/op_registry.h"
#include "passes/pass.h"

namespace trident::passes {

void dead_code_elimination(ir::Graph& g, PassContext&) {
  std::vector<char> needed(g.num_values(), 0);
  for (int v : g.outputs()) needed[v] = 1;
  std::vector<int> keep;
  const auto& order = g.order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::Node& n = g.node(*it);
    bool live = ir::OpRegistry::get(n.op).side_effects(n);
    for (int out : n.outputs) live = live || needed[out];
    if (!live) continue;
    keep.push_back(*it);
    for (int in : n.inputs) needed[in] = 1;
  }
  g.set_order(std::vector<int>(keep.rbegin(), keep.rend()));
}

}  // namespace trident::passes
