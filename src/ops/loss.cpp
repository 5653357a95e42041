// softmax_cross_entropy: the mean negative log-likelihood of integer labels — with attribute
// label_smoothing ε, of the target (1 − ε)·onehot + ε/K, as PyTorch's CrossEntropyLoss — and
// its backward, which recomputes the softmax from the logits rather than saving probabilities.
#include "ops/op_helpers.h"

namespace trident::ops {

void register_loss_ops() {
  ir::OpDef ce = op_def("softmax_cross_entropy", {"logits", "labels"}, {"loss"},
                        "mean over the batch of -log softmax(logits)[label]");
  ce.infer = [](const Node& n, const Graph& g) {
    const auto &z = in_value(g, n, 0), &y = in_value(g, n, 1);
    expect_rank(z, 2, "logits");
    expect_float(z, "logits");
    if (y.dtype != DType::i32 || y.shape != Shape{z.shape[0]})
      throw Error("labels must be i32 of shape [" + std::to_string(z.shape[0]) + "], got " +
                  std::string(dtype_name(y.dtype)) + shape_str(y.shape));
    const double eps = n.attrs.f("label_smoothing", 0.0);
    if (!(eps >= 0 && eps < 1)) throw Error("attribute 'label_smoothing' must be in [0, 1)");
    // The loss is at least f32: f16/bf16 logits are reduced in f32.
    return std::vector<TypeInfo>{{{1}, z.dtype == DType::f64 ? DType::f64 : DType::f32}};
  };
  ce.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1, -1};
    int dz = g.add_node1("softmax_cross_entropy_backward", {n.inputs[0], n.inputs[1], dys[0]},
                         copy_attrs(n.attrs, {"label_smoothing"}), n.name + ".backward");
    return std::vector<int>{dz, -1};
  };
  ce.reduction = true;
  ir::OpRegistry::add(ce);

  ir::OpDef bwd = op_def("softmax_cross_entropy_backward", {"logits", "labels", "dloss"}, {"dlogits"},
                         "(softmax(logits) - (1 - ε)·onehot(labels) - ε/K) * dloss / N, ε = label_smoothing");
  bwd.infer = [](const Node& n, const Graph& g) {
    const auto& z = in_value(g, n, 0);
    if (in_value(g, n, 2).shape != Shape{1}) throw Error("dloss must have shape [1]");
    return std::vector<TypeInfo>{{z.shape, z.dtype}};
  };
  ir::OpRegistry::add(bwd);
}

}  // namespace trident::ops
