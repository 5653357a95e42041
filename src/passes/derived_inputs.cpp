// use_derived_inputs: one derived copy per source value, placed before its first reader.
#include "passes/derived_inputs.h"

#include <map>

namespace trident::passes {

void use_derived_inputs(ir::Graph& g, const std::function<bool(const ir::Node&, size_t)>& select,
                        const std::function<int(int)>& derive, const std::function<void(ir::Node&)>& after) {
  std::map<int, int> copy_of;  // source value → its derived copy
  std::vector<int> order;
  const std::vector<int> before = g.order();  // a copy: add_node appends to the order
  for (int nid : before) {
    for (size_t i = 0; i < g.node(nid).inputs.size(); ++i) {
      if (!select(g.node(nid), i)) continue;
      const int v = g.node(nid).inputs[i];
      auto it = copy_of.find(v);
      if (it == copy_of.end()) {
        const int copy = derive(v);
        order.push_back(g.num_nodes() - 1);
        it = copy_of.emplace(v, copy).first;
      }
      g.node(nid).inputs[i] = it->second;
    }
    if (after) after(g.node(nid));
    order.push_back(nid);
  }
  g.set_order(std::move(order));
}

}  // namespace trident::passes
