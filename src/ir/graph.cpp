// Graph construction and queries. Shape inference is delegated to the op registry so
// that a node can never enter the graph with shapes its op does not accept.
#include "ir/graph.h"

#include <algorithm>

#include "core/checked_math.h"
#include "core/error.h"
#include "ir/op_registry.h"

namespace trident::ir {

std::string_view role_name(ValueRole r) {
  switch (r) {
    case ValueRole::Input: return "input";
    case ValueRole::Parameter: return "param";
    case ValueRole::State: return "state";
    case ValueRole::Activation: return "act";
  }
  return "?";
}

int Graph::new_value(const std::string& name, Shape shape, DType dtype, ValueRole role) {
  for (int64_t d : shape)
    if (d <= 0) throw Error("value '" + name + "' has a non-positive extent in shape " + shape_str(shape));
  checked_numel(shape, "value '" + name + "'");  // every tensor's element count fits the limit
  Value v;
  v.id = static_cast<int>(values_.size());
  v.name = name;
  v.shape = std::move(shape);
  v.dtype = dtype;
  v.role = role;
  values_.push_back(std::move(v));
  return values_.back().id;
}

int Graph::add_input(const std::string& name, Shape shape, DType dtype) {
  return new_value(name, std::move(shape), dtype, ValueRole::Input);
}

int Graph::add_parameter(const std::string& name, Shape shape, Init init, DType dtype) {
  int id = new_value(name, std::move(shape), dtype, ValueRole::Parameter);
  values_[id].init = init;
  return id;
}

int Graph::add_state(const std::string& name, Shape shape, Init init, DType dtype) {
  int id = new_value(name, std::move(shape), dtype, ValueRole::State);
  values_[id].init = init;
  return id;
}

std::vector<int> Graph::add_node(const std::string& op, std::vector<int> inputs, Attrs attrs,
                                 const std::string& name) {
  const OpDef& def = OpRegistry::get(op);
  Node n;
  n.id = static_cast<int>(nodes_.size());
  n.op = op;
  n.name = name.empty() ? op + "_" + std::to_string(n.id) : name;
  for (int in : inputs)
    if (in < 0 || in >= num_values())
      throw Error("node '" + n.name + "' (" + op + ") reads an undefined value");
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  std::vector<TypeInfo> outs;
  try {
    def.check_arity(n);
    outs = def.infer(n, *this);
  } catch (const Error& e) {
    throw Error("node '" + n.name + "' (" + op + "): " + e.what());
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string vname = n.name + (outs.size() > 1 ? "." + def.output_name(i) : "");
    int v = new_value(vname, outs[i].shape, outs[i].dtype, ValueRole::Activation);
    values_[v].producer = n.id;
    n.outputs.push_back(v);
  }
  nodes_.push_back(n);
  order_.push_back(n.id);
  return nodes_.back().outputs;
}

const std::vector<int>& Graph::set_attr_and_grow(int id, const std::string& key, AttrValue value) {
  Node& n = nodes_.at(id);
  const OpDef& def = OpRegistry::get(n.op);
  Node changed = n;
  changed.attrs.set(key, std::move(value));
  std::vector<TypeInfo> outs;
  try {
    outs = def.infer(changed, *this);
  } catch (const Error& e) {
    throw Error("node '" + n.name + "' (" + n.op + "): " + e.what());
  }
  if (outs.size() < n.outputs.size())
    throw Error("node '" + n.name + "' (" + n.op + "): attribute '" + key + "' would remove outputs");
  for (size_t i = 0; i < n.outputs.size(); ++i)
    if (values_[n.outputs[i]].shape != outs[i].shape || values_[n.outputs[i]].dtype != outs[i].dtype)
      throw Error("node '" + n.name + "' (" + n.op + "): attribute '" + key + "' would change output " +
                  std::to_string(i));
  n.attrs = std::move(changed.attrs);
  for (size_t i = n.outputs.size(); i < outs.size(); ++i) {
    const int v = new_value(n.name + "." + def.output_name(i), outs[i].shape, outs[i].dtype, ValueRole::Activation);
    values_[v].producer = id;
    nodes_[id].outputs.push_back(v);
  }
  return nodes_[id].outputs;
}

void Graph::replace_uses(int from, int to) {
  for (int nid : order_)
    for (int& in : nodes_[nid].inputs)
      if (in == from) in = to;
  for (int& out : outputs_)
    if (out == from) out = to;
}

void Graph::remove_from_order(const std::vector<int>& node_ids) {
  std::vector<int> kept;
  for (int nid : order_)
    if (std::find(node_ids.begin(), node_ids.end(), nid) == node_ids.end()) kept.push_back(nid);
  order_ = std::move(kept);
}

void Graph::move_to(int id, size_t pos) {
  auto it = std::find(order_.begin(), order_.end(), id);
  if (it != order_.end()) {
    size_t old = static_cast<size_t>(it - order_.begin());
    order_.erase(it);
    if (old < pos) --pos;
  }
  order_.insert(order_.begin() + static_cast<std::ptrdiff_t>(std::min(pos, order_.size())), id);
}

std::vector<int> Graph::values_with_role(ValueRole role) const {
  std::vector<int> out;
  for (const Value& v : values_)
    if (v.role == role) out.push_back(v.id);
  return out;
}

std::vector<std::vector<int>> Graph::users() const {
  std::vector<std::vector<int>> u(values_.size());
  for (int nid : order_)
    for (int in : nodes_[nid].inputs)
      if (u[in].empty() || u[in].back() != nid) u[in].push_back(nid);
  return u;
}

int Graph::find_value(const std::string& name) const {
  for (const Value& v : values_)
    if (v.name == name) return v.id;
  return -1;
}

}  // namespace trident::ir
