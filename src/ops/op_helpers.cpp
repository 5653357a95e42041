// Shared validation for op definitions; each throws one sentence the graph builder prefixes
// with the node's name.
#include "ops/op_helpers.h"

namespace trident::ops {

ir::OpDef op_def(std::string name, std::vector<std::string> inputs, std::vector<std::string> outputs,
                 std::string summary) {
  ir::OpDef d;
  d.name = std::move(name);
  d.inputs = std::move(inputs);
  d.outputs = std::move(outputs);
  d.summary = std::move(summary);
  return d;
}

const ir::Value& in_value(const Graph& g, const Node& n, size_t i) {
  return g.value(n.inputs.at(i));
}

void expect_rank(const ir::Value& v, size_t rank, const std::string& what) {
  if (v.shape.size() != rank)
    throw Error(what + " must have rank " + std::to_string(rank) + ", got " + shape_str(v.shape) +
                " from '" + v.name + "'");
}

void expect_float(const ir::Value& v, const std::string& what) {
  if (!is_floating(v.dtype))
    throw Error(what + " must be floating point, got " + std::string(dtype_name(v.dtype)));
}

void expect_same_shape(const ir::Value& a, const ir::Value& b, const std::string& what) {
  if (a.shape != b.shape || a.dtype != b.dtype)
    throw Error(what + ": shapes differ, " + shape_str(a.shape) + " ('" + a.name + "') vs " +
                shape_str(b.shape) + " ('" + b.name + "')");
}

Attrs copy_attrs(const Attrs& from, std::initializer_list<const char*> keys) {
  Attrs out;
  for (const char* k : keys)
    if (from.has(k)) out.set(k, from.items().at(k));
  return out;
}

}  // namespace trident::ops
