// Op cases of cbr_weight_backward (a first layer's batchnorm-relu backward and weight gradient
// as one op; ops/cbr_weight_backward.cpp) against the same node in f32 on cpu_ref, which runs
// its decomposition: every reduction width the GPU's one-pass kernel takes (R·S·C = 8, 36, 64,
// padded to 16, 48, 64), strides 1 and 2, row counts below one tile of 128 and over several,
// each mask form (y, the packed bits, the affine that recomputes y), f16 and bf16 (the kernel
// computes on the tensor cores; the fusion pass asks for nothing else). dw, dgamma, dbeta are
// held to the dtype's row relative to their scale: the reference rounds dconv to f32, the
// one-pass kernel never forms it.
#include "core/relu_mask.h"
#include "support/op_cases/family.h"

namespace trident::test_support::op_family {
namespace {

using ir::Attrs;

constexpr int64_t kChannels = 64;

// One cbr_weight_backward node "cwb" over x [N,H,W,C] and a k×k window; the mask is y (0), its
// packed bits (1) or the affine (2); per-channel tensors in f32, as mixed precision keeps them.
ir::Graph cbr_weight_backward(DType d, const Shape& x_shape, int64_t k, int64_t stride, int64_t pad, int mask_kind) {
  ir::Graph g;
  const Attrs window{{"stride", Shape{stride, stride}}, {"padding", Shape{pad, pad}}};
  const Shape w{kChannels, k, k, x_shape[3]};
  const Shape y = inferred_shape("conv2d", {x_shape, w}, window);
  const Shape c{kChannels};
  const int mask = mask_kind == 2   ? g.add_input("affine", {2, kChannels})
                   : mask_kind == 1 ? g.add_input("relu_mask", relu_mask_shape(y), DType::i32)
                                    : g.add_input("y", y, d);
  const int dy = g.add_input("dy", y, d), conv_out = g.add_input("conv_out", y, d);
  std::vector<int> in{mask, dy, conv_out, g.add_input("gamma", c), g.add_input("saved_mean", c),
                      g.add_input("saved_invstd", c), g.add_input("x", x_shape, d)};
  Attrs a = window;
  a.set("weight_shape", w);
  a.set("eps", 1e-5);
  g.add_node("cbr_weight_backward", in, a, "cwb");
  return g;
}

}  // namespace

void add_cbr_weight_backward_cases(std::vector<OpCase>& cases) {
  struct Form {
    const char* name;
    Shape x;
    int64_t k, stride, pad;
    bool every_mask;
    bool gpu_only;  // large enough that the reference takes seconds on the host
  };
  const Form forms[] = {
      {"Vgg3x3", {2, 12, 12, 4}, 3, 1, 1, true, false},        // 288 rows: two tiles and a part
      {"Stride2", {3, 9, 11, 4}, 3, 2, 1, false, false},       // 90 rows: one partial tile
      {"Window2x2C16", {2, 10, 10, 16}, 2, 2, 0, false, false}, // R·S·C = 64
      {"Pointwise", {2, 7, 7, 8}, 1, 1, 0, false, false},      // R·S·C = 8, padded to 16
      {"ManyTiles", {16, 72, 72, 4}, 3, 1, 1, true, true},     // 82 944 rows: several tiles a block
  };
  for (const Form& f : forms)
    for (int mask = 0; mask < 3; ++mask) {
      if (mask > 0 && !f.every_mask) continue;
      const Form form = f;
      OpCase c = scaled_case("cbr_weight_backward_" + std::string(f.name) + "_mask" + std::to_string(mask),
                             [=](DType d) { return cbr_weight_backward(d, form.x, form.k, form.stride, form.pad, mask); },
                             41, {DType::f16, DType::bf16}, {"cwb.dw", "cwb.dgamma", "cwb.dbeta"});
      c.prepare = [](GraphRunner& r, const ir::Graph& g) {
        map_values(r, g, {"y"}, non_negative);
        map_values(r, g, {"gamma", "saved_invstd"}, positive);
      };
      if (f.gpu_only) c.backends = {"cuda"};
      cases.push_back(std::move(c));
    }
}

}  // namespace trident::test_support::op_family
