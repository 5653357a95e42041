// Pooling over NHWC activations: max, average and global average, with backward ops.
// Max-pool backward recomputes the window's argmax from the input instead of saving indices.
#include "ops/op_helpers.h"
#include "ops/window.h"

namespace trident::ops {

namespace {

// Average pooling's divisor over a window that overhangs the input has no single convention
// (PyTorch and ONNX differ on whether its padding counts), so ceil_mode is max pooling's only.
void expect_floor_mode(const Attrs& a) {
  if (a.i("ceil_mode", 0) != 0) throw Error("ceil_mode=1 is supported for max pooling only");
}

ir::OpDef window_pool(const std::string& name, const std::string& summary) {
  ir::OpDef d = op_def(name, {"x"}, {"y"}, summary);
  const bool average = name == "avgpool2d";
  d.infer = [average](const Node& n, const Graph& g) {
    const auto& x = in_value(g, n, 0);
    expect_rank(x, 4, "input");
    if (average) expect_floor_mode(n.attrs);
    return std::vector<TypeInfo>{{pool_output_shape(n.attrs, x.shape), x.dtype}};
  };
  return d;
}

Attrs pool_attrs(const Node& n) {
  return pool_window_attrs(n.attrs);
}

}  // namespace

void register_pool_ops() {
  ir::OpDef maxp = window_pool("maxpool2d", "max over sliding windows");
  maxp.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1};
    return std::vector<int>{g.add_node1("maxpool2d_backward", {n.inputs[0], dys[0]}, pool_attrs(n),
                                        n.name + ".backward")};
  };
  maxp.reduction = true;
  ir::OpRegistry::add(maxp);

  ir::OpDef avgp = window_pool("avgpool2d", "mean over sliding windows");
  avgp.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1};
    Attrs a = pool_attrs(n);
    a.set("input_shape", g.value(n.inputs[0]).shape);
    return std::vector<int>{
        g.add_node1("avgpool2d_backward", {dys[0]}, a, n.name + ".backward")};
  };
  avgp.reduction = true;
  ir::OpRegistry::add(avgp);

  ir::OpDef maxb = op_def("maxpool2d_backward", {"x", "dy"}, {"dx"},
                          "routes each gradient to its window's first maximum");
  maxb.infer = [](const Node& n, const Graph& g) {
    const auto &x = in_value(g, n, 0), &dy = in_value(g, n, 1);
    expect_rank(x, 4, "input");
    if (pool_output_shape(n.attrs, x.shape) != dy.shape)
      throw Error("output gradient " + shape_str(dy.shape) + " does not match pooling of " +
                  shape_str(x.shape));
    return std::vector<TypeInfo>{{x.shape, dy.dtype}};
  };
  ir::OpRegistry::add(maxb);

  ir::OpDef avgb = op_def("avgpool2d_backward", {"dy"}, {"dx"},
                          "spreads each gradient evenly over its window");
  avgb.infer = [](const Node& n, const Graph& g) {
    Shape x = n.attrs.ints("input_shape");
    if (x.size() != 4) throw Error("attribute 'input_shape' must have 4 extents");
    expect_floor_mode(n.attrs);
    if (pool_output_shape(n.attrs, x) != in_value(g, n, 0).shape)
      throw Error("output gradient does not match pooling of " + shape_str(x));
    return std::vector<TypeInfo>{{x, in_value(g, n, 0).dtype}};
  };
  ir::OpRegistry::add(avgb);

  ir::OpDef gap = op_def("global_avgpool", {"x"}, {"y"},
                         "mean over height and width: [N,H,W,C] -> [N,1,1,C]");
  gap.infer = [](const Node& n, const Graph& g) {
    const auto& x = in_value(g, n, 0);
    expect_rank(x, 4, "input");
    return std::vector<TypeInfo>{{{x.shape[0], 1, 1, x.shape[3]}, x.dtype}};
  };
  gap.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1};
    Attrs a{{"input_shape", g.value(n.inputs[0]).shape}};
    return std::vector<int>{
        g.add_node1("global_avgpool_backward", {dys[0]}, a, n.name + ".backward")};
  };
  gap.reduction = true;
  ir::OpRegistry::add(gap);

  ir::OpDef gapb = op_def("global_avgpool_backward", {"dy"}, {"dx"},
                          "dy / (H*W) broadcast over height and width");
  gapb.infer = [](const Node& n, const Graph& g) {
    Shape x = n.attrs.ints("input_shape");
    const auto& dy = in_value(g, n, 0);
    if (x.size() != 4 || dy.shape != Shape{x[0], 1, 1, x[3]})
      throw Error("output gradient " + shape_str(dy.shape) + " does not match input_shape");
    return std::vector<TypeInfo>{{x, dy.dtype}};
  };
  ir::OpRegistry::add(gapb);
}

}  // namespace trident::ops
