// When a node may write an output into one of its inputs' buffers: the in-place passes
// (reuse_residual_buffer for inference, reuse_gradient_buffer for training) ask the same
// question of the graph once every reader is in its final place.
#pragma once
#include <algorithm>
#include <vector>

#include "ir/graph.h"
#include "ir/op_registry.h"

namespace trident::passes {

// Positions of the nodes in the execution order (-1 for nodes not in it).
inline std::vector<int> order_positions(const ir::Graph& g) {
  std::vector<int> position(g.num_nodes(), -1);
  const auto& order = g.order();
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int>(i);
  return position;
}

// Whether node `id` may overwrite `value`: an activation (not an input, weight or graph
// output), not a view of another tensor (a chain of in-place nodes is fine: each checks its
// own input's readers), read once by this node and by nobody after it.
inline bool buffer_free_after(const ir::Graph& g, const std::vector<std::vector<int>>& users,
                              const std::vector<int>& position, int id, int value) {
  const ir::Value& v = g.value(value);
  if (v.role != ir::ValueRole::Activation || v.producer < 0) return false;
  if (ir::OpRegistry::get(g.node(v.producer).op).view) return false;
  if (std::find(g.outputs().begin(), g.outputs().end(), value) != g.outputs().end()) return false;
  const ir::Node& n = g.node(id);
  if (std::count(n.inputs.begin(), n.inputs.end(), value) != 1) return false;
  for (int u : users[value])
    if (u != id && position[u] > position[id]) return false;
  return true;
}

}  // namespace trident::passes
