// flatten and reshape: views that share their input's memory (an alias the memory planner
// honours), so they cost no copy and no kernel time.
#include "ops/op_helpers.h"

namespace trident::ops {

namespace {
std::vector<int> reshape_back(Graph& g, const Node& n, const std::vector<int>& dys) {
  if (dys[0] < 0) return {-1};
  Attrs a{{"shape", g.value(n.inputs[0]).shape}};
  return {g.add_node1("reshape", {dys[0]}, a, n.name + ".backward")};
}
}  // namespace

void register_shape_ops() {
  ir::OpDef flat = op_def("flatten", {"x"}, {"y"}, "[N, ...] -> [N, prod(...)], a view");
  flat.infer = [](const Node& n, const Graph& g) {
    const auto& x = in_value(g, n, 0);
    if (x.shape.empty()) throw Error("cannot flatten a scalar");
    return std::vector<TypeInfo>{{{x.shape[0], numel(x.shape) / x.shape[0]}, x.dtype}};
  };
  flat.aliases = [](const Node&) { return std::vector<std::pair<int, int>>{{0, 0}}; };
  flat.view = true;
  flat.backward = reshape_back;
  ir::OpRegistry::add(flat);

  ir::OpDef reshape = op_def("reshape", {"x"}, {"y"}, "same elements, new shape, a view");
  reshape.infer = [](const Node& n, const Graph& g) {
    const auto& x = in_value(g, n, 0);
    Shape s = n.attrs.ints("shape");
    if (checked_numel(s, "the target shape of reshape") != numel(x.shape))
      throw Error("cannot reshape " + shape_str(x.shape) + " to " + shape_str(s));
    return std::vector<TypeInfo>{{s, x.dtype}};
  };
  reshape.aliases = [](const Node&) { return std::vector<std::pair<int, int>>{{0, 0}}; };
  reshape.view = true;
  reshape.backward = reshape_back;
  ir::OpRegistry::add(reshape);
}

}  // namespace trident::ops
