// Training, before autodiff: a cbr/cbar/bn_relu node keeps a 1-bit ReLU mask (core/relu_mask.h)
// beside its output y, and its backward reads the mask instead of y. The batchnorm backward
// reads its mask twice (once per pass); an f16 y is 16 bits an element, the mask 1, so the
// backward moves about a quarter fewer bytes. y itself is still written: the next layer reads it.
//
//   cbr ──► y ───────────────► next layer         cbr ──► y ──► next layer
//    └────► y ──► bn_relu_backward         ⇒       └────► mask ──► bn_relu_backward
//
// Legal where the output channels are a multiple of 8 (a kernel writes whole bytes of the
// mask); every other fused node keeps y as its mask and is recorded with the reason.
#include "passes/pass.h"

namespace trident::passes {

void pack_relu_mask(ir::Graph& g, PassContext& ctx) {
  for (int id : std::vector<int>(g.order())) {
    const ir::Node& n = g.node(id);
    if (n.op != "cbr" && n.op != "cbar" && n.op != "bn_relu") continue;
    if (n.attrs.i("relu_mask", 0) != 0) continue;
    if (n.attrs.has("relu_max")) {
      ctx.rejections.push_back({"pack_relu_mask", "relu-bitmask", n.name,
                                "a clipped relu (ReLU6) masks its gradient with 0 < y < max, read from y"});
      continue;
    }
    const int64_t channels = g.value(n.outputs[0]).shape.back();
    if (channels % 8 != 0) {
      ctx.rejections.push_back({"pack_relu_mask", "relu-bitmask", n.name,
                                std::to_string(channels) + " output channels are not a multiple of 8"});
      continue;
    }
    const std::string name = n.name;
    g.set_attr_and_grow(id, "relu_mask", int64_t{1});
    ctx.fusions.push_back({"pack_relu_mask", "relu-bitmask", name, {name}});
  }
}

}  // namespace trident::passes
