// Text form of a graph: declarations of inputs, parameters and state, then one line per
// node in execution order. Stable and diff-friendly, so `--dump-ir` output can be compared.
#include <sstream>

#include "ir/graph.h"

namespace trident::ir {

namespace {
std::string typed(const Value& v) {
  return "%" + std::to_string(v.id) + ":" + std::string(dtype_name(v.dtype)) + shape_str(v.shape);
}
}  // namespace

std::string print(const Graph& g) {
  std::ostringstream os;
  for (ValueRole role : {ValueRole::Input, ValueRole::Parameter, ValueRole::State})
    for (int id : g.values_with_role(role))
      os << role_name(role) << " " << typed(g.value(id)) << "  # " << g.value(id).name << "\n";
  for (int nid : g.order()) {
    const Node& n = g.node(nid);
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << typed(g.value(n.outputs[i]));
    os << (n.outputs.empty() ? "" : " = ") << n.op << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << "%" << n.inputs[i];
    os << ")";
    std::string attrs = n.attrs.to_string();
    if (!attrs.empty()) os << " {" << attrs << "}";
    os << "  # " << n.name << "\n";
  }
  os << "outputs(";
  for (size_t i = 0; i < g.outputs().size(); ++i) os << (i ? ", " : "") << "%" << g.outputs()[i];
  os << ")\n";
  return os.str();
}

}  // namespace trident::ir
