// The order surgery of graph_edit.h.
#include "passes/graph_edit.h"

#include <algorithm>

namespace trident::passes {

size_t order_position(const ir::Graph& g, int id) {
  const auto& order = g.order();
  return static_cast<size_t>(std::find(order.begin(), order.end(), id) - order.begin());
}

void replace_nodes(ir::Graph& g, const std::vector<int>& made, int at, const std::vector<int>& gone) {
  size_t pos = order_position(g, at);
  for (int id : made) g.move_to(id, pos++);
  if (!gone.empty()) g.remove_from_order(gone);
}

}  // namespace trident::passes
