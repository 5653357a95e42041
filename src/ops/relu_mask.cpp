// The packed ReLU mask as ops of their own: relu_mask (y → its 1-bit mask, core/relu_mask.h)
// and relu_mask_backward (the mask and dy → dy where the bit is set). They are the
// decomposition of the fused ops that keep a mask instead of y (pack_relu_mask), so those can
// be tested against plain ops.
#include "core/relu_mask.h"
#include "ops/op_helpers.h"

namespace trident::ops {

void register_relu_mask_ops() {
  ir::OpDef pack = op_def("relu_mask", {"y"}, {"mask"},
                          "1-bit mask of y > 0, 32 channels to an i32 word (channels last)");
  pack.infer = [](const Node& n, const Graph& g) {
    const ir::Value& y = in_value(g, n, 0);
    expect_float(y, "relu output");
    if (y.shape.empty()) throw Error("the relu output needs a channel axis");
    return std::vector<TypeInfo>{{relu_mask_shape(y.shape), DType::i32}};
  };
  ir::OpRegistry::add(pack);

  ir::OpDef bwd = op_def("relu_mask_backward", {"mask", "dy"}, {"dx"},
                         "dy where the packed relu mask is set, else 0");
  bwd.infer = [](const Node& n, const Graph& g) {
    const ir::Value &mask = in_value(g, n, 0), &dy = in_value(g, n, 1);
    expect_float(dy, "gradient");
    if (mask.dtype != DType::i32 || mask.shape != relu_mask_shape(dy.shape))
      throw Error("the mask must be i32 " + shape_str(relu_mask_shape(dy.shape)) + " for a gradient of shape " +
                  shape_str(dy.shape));
    return std::vector<TypeInfo>{{dy.shape, dy.dtype}};
  };
  ir::OpRegistry::add(bwd);
}

}  // namespace trident::ops
