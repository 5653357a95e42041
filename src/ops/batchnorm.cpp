// batchnorm2d over the channel axis of NHWC activations, and its training-mode backward.
// Training mode has five outputs: y, the saved mean and inverse std that backward needs,
// and the running statistics, which alias their inputs and are updated in place.
#include "ops/op_helpers.h"
#include "ops/norm_params.h"

namespace trident::ops {

void register_batchnorm_ops() {
  ir::OpDef bn = op_def("batchnorm2d",
                        {"x", "gamma", "beta", "running_mean", "running_var"},
                        {"y", "saved_mean", "saved_invstd", "running_mean_out", "running_var_out"},
                        "batch normalisation per channel; training: batch statistics + running update");
  bn.infer = [](const Node& n, const Graph& g) {
    const auto& x = in_value(g, n, 0);
    expect_rank(x, 4, "input");
    expect_float(x, "input");
    const Shape c{x.shape[3]};
    for (size_t i = 1; i < 5; ++i)
      if (in_value(g, n, i).shape != c)
        throw Error("'" + in_value(g, n, i).name + "' must have shape " + shape_str(c) +
                    " (one value per channel), got " + shape_str(in_value(g, n, i).shape));
    NormParams::of(n).check();
    // Statistics keep the per-channel parameters' dtype (f32 also when x is f16).
    const DType stats = in_value(g, n, 1).dtype;
    std::vector<TypeInfo> out{{x.shape, x.dtype}};
    if (n.attrs.i("training", 1))
      for (int i = 0; i < 4; ++i) out.push_back({c, stats});
    return out;
  };
  bn.aliases = [](const Node& n) {
    if (!n.attrs.i("training", 1)) return std::vector<std::pair<int, int>>{};
    return std::vector<std::pair<int, int>>{{3, 3}, {4, 4}};
  };
  bn.side_effects = [](const Node& n) { return n.attrs.i("training", 1) != 0; };
  bn.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    std::vector<int> grads(5, -1);
    if (dys[0] < 0) return grads;
    if (!n.attrs.i("training", 1))
      throw Error("node '" + n.name +
                  "': training through an inference-mode batchnorm2d is not supported yet");
    Attrs a = copy_attrs(n.attrs, {"eps"});
    auto r = g.add_node("batchnorm2d_backward",
                        {n.inputs[0], dys[0], n.inputs[1], n.outputs[1], n.outputs[2]}, a,
                        n.name + ".backward");
    grads[0] = r[0];
    grads[1] = r[1];
    grads[2] = r[2];
    return grads;
  };
  bn.reduction = true;
  bn.f32_inputs = {"gamma", "beta", "running_mean", "running_var"};
  ir::OpRegistry::add(bn);

  ir::OpDef bwd = op_def("batchnorm2d_backward",
                         {"x", "dy", "gamma", "saved_mean", "saved_invstd"},
                         {"dx", "dgamma", "dbeta"},
                         "training-mode batchnorm2d backward from the saved statistics");
  bwd.infer = [](const Node& n, const Graph& g) {
    const auto &x = in_value(g, n, 0), &dy = in_value(g, n, 1);
    expect_rank(x, 4, "input");
    expect_same_shape(x, dy, "input and output gradient");
    const Shape c{x.shape[3]};
    for (size_t i = 2; i < 5; ++i)
      if (in_value(g, n, i).shape != c)
        throw Error("'" + in_value(g, n, i).name + "' must have shape " + shape_str(c));
    const DType param = in_value(g, n, 2).dtype;
    return std::vector<TypeInfo>{{x.shape, x.dtype}, {c, param}, {c, param}};
  };
  bwd.reduction = true;
  ir::OpRegistry::add(bwd);
}

}  // namespace trident::ops
