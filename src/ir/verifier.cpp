// Structural checks run after every pass: each value is defined once before it is read,
// every node's outputs still match its op's shape inference, and graph outputs exist.
#include <vector>

#include "core/error.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace trident::ir {

void verify(const Graph& g) {
  std::vector<char> defined(g.num_values(), 0);
  for (int v = 0; v < g.num_values(); ++v)
    if (g.value(v).role != ValueRole::Activation) defined[v] = 1;
  std::vector<char> seen(g.num_values() ? g.num_values() : 1, 0);
  for (int nid : g.order()) {
    const Node& n = g.node(nid);
    const OpDef& def = OpRegistry::get(n.op);
    for (int in : n.inputs) {
      if (in < 0 || in >= g.num_values())
        throw Error("verifier: node '" + n.name + "' reads a value id out of range");
      if (!defined[in])
        throw Error("verifier: node '" + n.name + "' reads '" + g.value(in).name +
                    "' before it is defined");
    }
    std::vector<TypeInfo> expect;
    try {
      def.check_arity(n);
      expect = def.infer(n, g);
    } catch (const Error& e) {
      throw Error("verifier: node '" + n.name + "' (" + n.op + "): " + e.what());
    }
    if (expect.size() != n.outputs.size())
      throw Error("verifier: node '" + n.name + "' has " + std::to_string(n.outputs.size()) +
                  " outputs, its op infers " + std::to_string(expect.size()));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value& v = g.value(n.outputs[i]);
      if (defined[v.id])
        throw Error("verifier: value '" + v.name + "' is defined twice (node '" + n.name + "')");
      if (v.producer != nid)
        throw Error("verifier: value '" + v.name + "' does not name node '" + n.name + "' as producer");
      if (v.shape != expect[i].shape || v.dtype != expect[i].dtype)
        throw Error("verifier: node '" + n.name + "' output '" + v.name + "' is " +
                    shape_str(v.shape) + " but its op infers " + shape_str(expect[i].shape));
      defined[v.id] = 1;
    }
  }
  for (int out : g.outputs())
    if (out < 0 || out >= g.num_values() || !defined[out])
      throw Error("verifier: a graph output is not defined by any live node");
}

}  // namespace trident::ir
