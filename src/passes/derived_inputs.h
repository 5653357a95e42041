// For passes that make some node inputs read a derived copy of a value (assign_precision's
// f16 casts, pad_channels' padded copies): each copy is made once per source value, by one
// new node placed right before the first node that reads it, and the graph's order is rebuilt.
#pragma once
#include <functional>

#include "ir/graph.h"

namespace trident::passes {

// Walks the nodes in order. Input i of node n is replaced when select(n, i) says so, by
// derive(v) for its value v — called once per v, it adds exactly one node (g.add_node1) and
// returns that node's output. after(n) then runs on every node, with its inputs replaced.
void use_derived_inputs(ir::Graph& g, const std::function<bool(const ir::Node&, size_t)>& select,
                        const std::function<int(int)>& derive,
                        const std::function<void(ir::Node&)>& after = nullptr);

}  // namespace trident::passes
