// The IR: a graph of SSA values (shape + dtype + role) and nodes (op name + attributes).
// Nodes are kept in execution order; passes rewrite the order list and mark nodes dead,
// so value and node ids stay stable through the whole compile.
#pragma once
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "ir/attrs.h"

namespace trident::ir {

// What a value is for; decides where the memory planner puts it.
enum class ValueRole {
  Input,       // fed by the caller each step (images, labels, learning rate)
  Parameter,   // trained weights: the flat parameter buffer
  State,       // persistent non-trained state: running statistics, optimizer momentum
  Activation,  // produced by a node: the arena (or aliased onto its input)
};
std::string_view role_name(ValueRole r);

// How a parameter or state tensor is initialised before training.
struct Init {
  // RandomBits: uniform 32-bit words (i32 only): random keys, such as dropout's.
  enum Kind { Zeros, Ones, KaimingNormal, KaimingUniform, Constant, RandomBits } kind = Zeros;
  int64_t fan_in = 1;
  double value = 0;  // Constant: every element
};

struct Value {
  int id = -1;
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  ValueRole role = ValueRole::Activation;
  int producer = -1;  // node id, -1 for graph inputs/parameters/state
  Init init;
};

struct Node {
  int id = -1;
  std::string op;
  std::string name;
  std::vector<int> inputs;
  std::vector<int> outputs;
  Attrs attrs;
};

class Graph {
 public:
  int add_input(const std::string& name, Shape shape, DType dtype = DType::f32);
  int add_parameter(const std::string& name, Shape shape, Init init, DType dtype = DType::f32);
  int add_state(const std::string& name, Shape shape, Init init, DType dtype = DType::f32);

  // Adds a node at the end of the order; output shapes come from the op's shape inference.
  // A shape or attribute error is thrown as a sentence naming the node.
  std::vector<int> add_node(const std::string& op, std::vector<int> inputs, Attrs attrs,
                            const std::string& name = "");
  int add_node1(const std::string& op, std::vector<int> inputs, Attrs attrs,
                const std::string& name = "") {
    return add_node(op, std::move(inputs), std::move(attrs), name).at(0);
  }

  const Value& value(int id) const { return values_.at(id); }
  Value& value(int id) { return values_.at(id); }
  const Node& node(int id) const { return nodes_.at(id); }
  Node& node(int id) { return nodes_.at(id); }
  int num_values() const { return static_cast<int>(values_.size()); }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }  // dead ones included

  // Live nodes in execution order.
  const std::vector<int>& order() const { return order_; }
  void set_order(std::vector<int> order) { order_ = std::move(order); }

  // Values the caller reads after a run (loss, logits, parameter gradients in tests...).
  const std::vector<int>& outputs() const { return outputs_; }
  void mark_output(int value) { outputs_.push_back(value); }
  void set_outputs(std::vector<int> v) { outputs_ = std::move(v); }

  // Sets attribute `key` of node `id` to `value` and re-runs the op's shape inference: outputs
  // it no longer gives are an Error, outputs it adds get new values (named as add_node names
  // them); existing outputs must keep their shapes and dtypes. Returns the node's outputs.
  const std::vector<int>& set_attr_and_grow(int id, const std::string& key, AttrValue value);
  // Makes every live node and graph output that reads `from` read `to` instead.
  void replace_uses(int from, int to);
  // Removes nodes from the order (their ids stay valid, they just no longer run).
  void remove_from_order(const std::vector<int>& node_ids);
  // Moves node `id` (already created, e.g. by add_node) to just before position `pos` of the order.
  void move_to(int id, size_t pos);

  // Values of a role, in creation order.
  std::vector<int> values_with_role(ValueRole role) const;
  // For every value id: the live nodes that read it (in order).
  std::vector<std::vector<int>> users() const;
  // Finds a value by name; -1 if none.
  int find_value(const std::string& name) const;

 private:
  int new_value(const std::string& name, Shape shape, DType dtype, ValueRole role);

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<int> order_;
  std::vector<int> outputs_;
};

// Human-readable text form, one node per line:
//   %12:f32[8,28,28,16] = conv2d(%0, %1) {stride=[1,1] ...}  # conv1
std::string print(const Graph& g);

// Checks structural invariants (defined before use, shapes agree with inference, ids valid).
// Throws trident::Error naming the first offending node.
void verify(const Graph& g);

}  // namespace trident::ir
