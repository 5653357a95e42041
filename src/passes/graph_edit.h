// The graph surgery every fusion ends with: the new nodes take the place, in the execution
// order, of a node they replace, and the replaced nodes leave the order. One helper, so no pass
// counts positions by hand.
#pragma once
#include <cstddef>
#include <vector>

#include "ir/graph.h"

namespace trident::passes {

// Where node `id` runs in g's execution order; the order's size where it does not run.
size_t order_position(const ir::Graph& g, int id);

// `made` (new nodes, in this order) run just before `at`, which has every input of theirs by
// then (the last node of the chain they replace); then every node of `gone` (`at` among them,
// or not) leaves the order. The caller rewires the replaced outputs (Graph::replace_uses).
void replace_nodes(ir::Graph& g, const std::vector<int>& made, int at, const std::vector<int>& gone);

}  // namespace trident::passes
