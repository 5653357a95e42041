// Pooling over NHWC activations: max, average and global average, with backward ops.
// Max-pool backward recomputes the window's argmax from the input instead of saving indices,
// unless the forward keeps a one-byte window index (attribute window_index, core/window_index.h;
// the save_maxpool_index pass), which maxpool2d_index_backward then reads instead of the input.
// Such a forward may also apply the previous batchnorm and relu itself (attribute prologue).
#include "core/window_index.h"
#include "ops/op_helpers.h"
#include "ops/window.h"

namespace trident::ops {

namespace {

// Average pooling's divisor over a window that overhangs the input has no single convention
// (PyTorch and ONNX differ on whether its padding counts), so ceil_mode is max pooling's only.
void expect_floor_mode(const Attrs& a) {
  if (a.i("ceil_mode", 0) != 0) throw Error("ceil_mode=1 is supported for max pooling only");
}

// A max pooling's window must have fewer cells than a window index byte can name.
void expect_indexable_window(const Attrs& a) {
  const Window w = pool_window(a);
  if (w.kernel.h * w.kernel.w > kMostWindowCells)
    throw Error("a " + std::to_string(w.kernel.h) + "x" + std::to_string(w.kernel.w) +
                " window has more cells than a one-byte window index names (at most " +
                std::to_string(kMostWindowCells) + ")");
}

ir::OpDef window_pool(const std::string& name, const std::string& summary) {
  ir::OpDef d = op_def(name, {"x"}, {"y"}, summary);
  const bool average = name == "avgpool2d";
  if (!average) {
    d.inputs.push_back("x_affine?");     // with attribute prologue = 1
    d.outputs.push_back("window_index");  // with attribute window_index = 1
  }
  d.infer = [average](const Node& n, const Graph& g) {
    const auto& x = in_value(g, n, 0);
    expect_rank(x, 4, "input");
    if (average) expect_floor_mode(n.attrs);
    const bool prologue = n.attrs.i("prologue", 0) != 0;
    if (prologue != (n.inputs.size() == 2))
      throw Error("attribute prologue needs exactly one more input, the input's affine");
    if (prologue) expect_affine(in_value(g, n, 1), x.shape[3], "the input's affine");
    const Shape y = pool_output_shape(n.attrs, x.shape);
    std::vector<TypeInfo> out{{y, x.dtype}};
    if (!average && n.attrs.i("window_index", 0) != 0) {
      expect_indexable_window(n.attrs);
      out.push_back({window_index_shape(numel(y)), DType::i32});
    }
    return out;
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
  // x_affine (attribute prologue = 1, defer_bn_apply after autodiff): x is a raw convolution
  // output and the pooling's input was relu(x·scale + shift) of it (bn_apply), applied while
  // the windows are read. The backward then reads the window index only.
  maxp.decompose = [](Graph& g, const Node& n) {
    Attrs a = n.attrs;
    a.set("prologue", int64_t{0});
    int x = n.inputs[0];
    if (n.inputs.size() == 2) x = g.add_node1("bn_apply", {x, n.inputs[1]}, {}, n.name + ".prologue");
    return g.add_node("maxpool2d", {x}, a, n.name + ".plain");
  };
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

  ir::OpDef maxi = op_def("maxpool2d_index_backward", {"window_index", "dy"}, {"dx"},
                          "routes each gradient to the window cell its forward's window index names");
  maxi.infer = [](const Node& n, const Graph& g) {
    const auto &index = in_value(g, n, 0), &dy = in_value(g, n, 1);
    const Shape x = n.attrs.ints("input_shape");
    if (x.size() != 4) throw Error("attribute 'input_shape' must have 4 extents");
    expect_indexable_window(n.attrs);
    if (pool_output_shape(n.attrs, x) != dy.shape)
      throw Error("output gradient " + shape_str(dy.shape) + " does not match pooling of " + shape_str(x));
    if (index.dtype != DType::i32 || index.shape != window_index_shape(numel(dy.shape)))
      throw Error("the window index must be i32 " + shape_str(window_index_shape(numel(dy.shape))));
    return std::vector<TypeInfo>{{x, dy.dtype}};
  };
  ir::OpRegistry::add(maxi);

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
