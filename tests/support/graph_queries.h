// Test support: small questions tests ask of a graph.
#pragma once
#include <string>

#include "ir/graph.h"

namespace trident::test_support {

// Live nodes of op `op`.
inline int count_op(const ir::Graph& g, const std::string& op) {
  int n = 0;
  for (int id : g.order()) n += g.node(id).op == op;
  return n;
}

}  // namespace trident::test_support
