// Op cases of the batchnorm family: batchnorm2d in training (saved and running statistics, in place
// and in separate buffers) and inference, batchnorm2d_backward, the fused batchnorm_relu_backward
// (relu output, packed mask or affine form; ± residual gradient; one or two incoming gradients, or
// a max pooling's gradient routed through its window index), fold_batchnorm, the fused bn_relu
// (training ± packed mask, inference), and bn_apply. Channel counts that do not fill a tile (3, 10,
// 17) and row counts that do not fill a block.
#include <algorithm>

#include "core/relu_mask.h"
#include "support/op_cases/family.h"

namespace trident::test_support::op_family {
namespace {

using ir::Attrs;

OpCase make(std::string name, std::function<ir::Graph(DType)> build, uint64_t seed,
            std::vector<std::string> outputs = {}) {
  OpCase c = scaled_case(std::move(name), std::move(build), seed, kF32F16, std::move(outputs));
  // A saved inverse deviation is positive: oneDNN's backward takes the variance, from which a
  // negative one's sign cannot come back.
  c.prepare = make_positive({"saved_invstd"});
  return c;
}

// Per element on the f32 row, two draws: the odd channel counts and momenta.
OpCase per_element(std::string name, std::function<ir::Graph(DType)> build, std::vector<std::string> positive_values) {
  OpCase c = per_element_case(std::move(name), std::move(build));
  c.prepare = make_positive(std::move(positive_values));
  return c;
}

// Per-channel tensors share the activation dtype, as the IR's shape inference gives them.
ir::Graph bn_forward(DType d, const Shape& s, bool training) {
  ir::Graph g;
  const Shape c{s[3]};
  const int x = g.add_input("x", s, d);
  const int gamma = g.add_parameter("gamma", c, {}, d), beta = g.add_parameter("beta", c, {}, d);
  const int mean = g.add_state("running_mean", c, {}, d), var = g.add_state("running_var", c, {}, d);
  g.add_node("batchnorm2d", {x, gamma, beta, mean, var},
             {{"eps", 1e-5}, {"momentum", 0.1}, {"training", int64_t{training}}}, "bn");
  return g;
}

ir::Graph bn_backward(DType d, const Shape& s, double eps, bool gamma_parameter) {
  ir::Graph g;
  const Shape c{s[3]};
  const int x = g.add_input("x", s, d), dy = g.add_input("dy", s, d);
  const int gamma = gamma_parameter ? g.add_parameter("gamma", c, {}, d) : g.add_input("gamma", c, d);
  g.add_node("batchnorm2d_backward", {x, dy, gamma, g.add_input("saved_mean", c, d), g.add_input("saved_invstd", c, d)},
             {{"eps", eps}}, "bwd");
  return g;
}

// two_gradients: the incoming gradient arrives as dy + dy_other (fold_gradient_sum's form); packed:
// the mask is the 1-bit relu mask (random bits) instead of y; affine: the mask is recomputed from
// conv_out through the layer's affine (defer_bn_apply); relu_max > 0: y is a clipped relu's
// output (ReLU6's form), masked by 0 < y < relu_max.
ir::Graph bn_relu_backward(DType d, const Shape& s, bool residual, bool two_gradients = false, bool packed = false,
                           bool affine = false, bool gamma_parameter = false, double relu_max = 0) {
  ir::Graph g;
  const Shape c{s[3]};
  const int mask = affine   ? g.add_input("affine", {2, s[3]})
                   : packed ? g.add_input("relu_mask", relu_mask_shape(s), DType::i32)
                            : g.add_input("y", s, d);
  const int dy = g.add_input("dy", s, d), conv_out = g.add_input("conv_out", s, d);
  const int gamma = gamma_parameter ? g.add_parameter("gamma", c, {}, d) : g.add_input("gamma", c, d);
  std::vector<int> in{mask, dy, conv_out, gamma, g.add_input("saved_mean", c, d), g.add_input("saved_invstd", c, d)};
  if (two_gradients) in.push_back(g.add_input("dy_other", s, d));
  Attrs a{{"eps", 1e-5}, {"residual", int64_t{residual}}};
  if (relu_max > 0) a.set("relu_max", relu_max);
  g.add_node("batchnorm_relu_backward", in, a, "brb");
  return g;
}

// fold_maxpool_gradient's form: dy is the gradient of a max pooling of y by `window`, routed
// through the pooling's window index by the backward itself. The index comes from a training
// max pooling of "pool_x" (y's shape), so it names real cells. Mask: 0 y, 1 packed, 2 affine.
ir::Graph bn_relu_backward_pooled(DType d, const Shape& s, const Attrs& window, bool residual, int mask_kind) {
  ir::Graph g;
  const Shape c{s[3]};
  Attrs forward = window;
  forward.set("window_index", int64_t{1});
  const std::vector<int> pool = g.add_node("maxpool2d", {g.add_input("pool_x", s, d)}, forward, "pool");
  const int mask = mask_kind == 2   ? g.add_input("affine", {2, s[3]})
                   : mask_kind == 1 ? g.add_input("relu_mask", relu_mask_shape(s), DType::i32)
                                    : g.add_input("y", s, d);
  const int dy = g.add_input("dy", g.value(pool[0]).shape, d), conv_out = g.add_input("conv_out", s, d);
  std::vector<int> in{mask, dy, conv_out, g.add_input("gamma", c, d), g.add_input("saved_mean", c, d),
                      g.add_input("saved_invstd", c, d), pool[1]};
  Attrs a = window;
  a.set("eps", 1e-5);
  a.set("residual", int64_t{residual});
  a.set("pooled_dy", int64_t{1});
  g.add_node("batchnorm_relu_backward", in, a, "brb");
  return g;
}

// A clipped relu's output: in [0, 1], with exact zeros and exact ones (the clipped elements).
double clipped_at_one(double v) { return std::clamp(v, 0.0, 1.0); }
double clipped_at_half(double v) { return std::clamp(v, 0.0, 0.5); }

// One bn_relu node "bnr" (ops/bn_relu.cpp); packed: training keeps the 1-bit relu mask.
ir::Graph bn_relu(DType d, const Shape& s, bool training, bool packed = false) {
  ir::Graph g;
  const Shape c{s[3]};
  const int x = g.add_input("x", s, d);
  const int gamma = g.add_parameter("gamma", c, {}, d), beta = g.add_parameter("beta", c, {}, d);
  const int mean = g.add_state("running_mean", c, {}, d), var = g.add_state("running_var", c, {}, d);
  Attrs a{{"eps", 1e-5}, {"momentum", 0.1}, {"training", int64_t{training}}};
  if (packed) a.set("relu_mask", int64_t{1});
  g.add_node("bn_relu", {x, gamma, beta, mean, var}, a, "bnr");
  return g;
}

std::vector<std::string> brb_outputs(bool residual) {
  std::vector<std::string> outs{"brb.dconv", "brb.dgamma", "brb.dbeta"};
  if (residual) outs.push_back("brb.dresidual");
  return outs;
}

}  // namespace

void add_batchnorm_cases(std::vector<OpCase>& cases) {
  // Odd channel counts and momenta, training and inference forms of one node, per element.
  struct Named {
    const char* name;
    Shape x;
    double eps, momentum;
  };
  const Named odd[] = {{"Small", {4, 5, 6, 8}, 1e-5, 0.1},
                       {"OddChannels", {2, 3, 3, 17}, 1e-3, 0.5},
                       {"Wide", {8, 7, 7, 64}, 1e-5, 0.1},
                       {"TwoValuesPerChannel", {2, 1, 1, 3}, 1e-5, 1.0}};
  for (const Named& n : odd) {
    const Shape s = n.x;
    const double eps = n.eps, momentum = n.momentum;
    auto forward = [=](bool training) {
      return [=](DType d) {
        ir::Graph g;
        const Shape ch{s[3]};
        std::vector<int> in{g.add_input("x", s, d)};
        for (const char* p : {"gamma", "beta", "running_mean", "running_var"})
          in.push_back(g.add_parameter(p, ch, {}, d));
        g.add_node("batchnorm2d", in, {{"eps", eps}, {"momentum", momentum}, {"training", int64_t{training}}},
                   training ? "bn.train" : "bn.infer");
        return g;
      };
    };
    cases.push_back(per_element(std::string("batchnorm2d_train_") + n.name, forward(true), {"gamma", "running_var"}));
    // Running statistics written to separate outputs too (not aliased onto the inputs).
    OpCase separate =
        per_element(std::string("batchnorm2d_train_separate_") + n.name, forward(true), {"gamma", "running_var"});
    separate.separate_outputs = true;
    cases.push_back(std::move(separate));
    cases.push_back(per_element(std::string("batchnorm2d_infer_") + n.name, forward(false), {"gamma", "running_var"}));
    cases.push_back(per_element(std::string("batchnorm2d_backward_") + n.name,
                                [=](DType d) { return bn_backward(d, s, eps, true); }, {"gamma", "saved_invstd"}));
  }

  // batchnorm_relu_backward for the fused blocks' output shapes: y a relu output (about half
  // zeros), gamma and saved_invstd positive.
  const std::pair<const char*, Shape> blocks[] = {
      {"Cbr", {2, 8, 8, 8}}, {"CbrBiasStride2", {2, 5, 5, 6}}, {"Cbar", {2, 8, 8, 8}}, {"CbarBias1x1", {3, 6, 6, 16}}};
  for (const auto& [name, shape] : blocks) {
    const Shape s = shape;
    const bool residual = std::string(name).rfind("Cbar", 0) == 0;
    OpCase c = per_element(std::string("batchnorm_relu_backward_") + name,
                           [=](DType d) { return bn_relu_backward(d, s, residual, false, false, false, true); },
                           {"gamma", "saved_invstd"});
    c.prepare = [](GraphRunner& r, const ir::Graph& g) {
      map_values(r, g, {"y"}, non_negative);
      map_values(r, g, {"gamma", "saved_invstd"}, positive);
    };
    cases.push_back(std::move(c));
    OpCase dec = decomposition_case(std::string("batchnorm_relu_backward_") + name, [=](DType d) {
      return bn_relu_backward(d, s, residual, false, false, false, true);
    });
    dec.prepare = [](GraphRunner& r, const ir::Graph& g) {
      map_values(r, g, {"y"}, non_negative);
      map_values(r, g, {"saved_invstd"}, positive);
    };
    cases.push_back(std::move(dec));
  }

  // The clipped relu's backward (cbr with relu_max, ReLU6): y clipped at 1, so both bounds
  // mask elements; per element on small integers, against the decomposition, and on reals.
  for (const Shape& s : {Shape{2, 8, 8, 8}, Shape{3, 5, 5, 6}}) {
    const std::string t = tag(s);
    OpCase c = per_element("batchnorm_relu_backward_clipped_" + t,
                           [=](DType d) { return bn_relu_backward(d, s, false, false, false, false, true, 1.0); },
                           {"gamma", "saved_invstd"});
    c.prepare = [](GraphRunner& r, const ir::Graph& g) {
      map_values(r, g, {"y"}, clipped_at_one);
      map_values(r, g, {"gamma", "saved_invstd"}, positive);
    };
    cases.push_back(std::move(c));
    OpCase dec = decomposition_case("batchnorm_relu_backward_clipped_" + t, [=](DType d) {
      return bn_relu_backward(d, s, false, true, false, false, true, 1.0);
    });
    dec.prepare = [](GraphRunner& r, const ir::Graph& g) {
      map_values(r, g, {"y"}, clipped_at_one);
      map_values(r, g, {"saved_invstd"}, positive);
    };
    cases.push_back(std::move(dec));
    for (bool two : {false, true}) {
      OpCase real = make("batchnorm_relu_backward_clipped_reals_" + t + (two ? "_two_dy" : ""),
                         [=](DType d) { return bn_relu_backward(d, s, false, two, false, false, false, 0.5); }, 30,
                         brb_outputs(false));
      real.prepare = [](GraphRunner& r, const ir::Graph& g) {
        map_values(r, g, {"y"}, clipped_at_half);
        map_values(r, g, {"saved_invstd"}, positive);
      };
      cases.push_back(std::move(real));
    }
  }

  // bn_relu against its decomposition (batchnorm2d → relu [→ relu_mask]) and, in the
  // training form, its saved and running statistics: a pre-activation's shapes, C a multiple of
  // 8 (the packed mask: cuda and cpu_ref only, the cpu backend keeps y) and odd (17).
  for (const Shape& s : {Shape{4, 6, 6, 16}, Shape{2, 5, 5, 17}, Shape{8, 8, 8, 64}}) {
    const std::string t = tag(s);
    for (bool training : {true, false}) {
      const std::string form = std::string("bn_relu_") + (training ? "train_" : "infer_") + t;
      cases.push_back(decomposition_case(form, [=](DType d) { return bn_relu(d, s, training); }));
      cases.push_back(scaled_case(form, [=](DType d) { return bn_relu(d, s, training); }, 29, kF32F16));
    }
    if (s[3] % 8 != 0) continue;
    OpCase packed = decomposition_case("bn_relu_train_packed_mask_" + t, [=](DType d) { return bn_relu(d, s, true, true); });
    packed.backends = {"cuda"};
    cases.push_back(std::move(packed));
  }

  // N·H·W from 6 (smaller than a block of rows) to 25 088 (many row chunks), C from 3 to 130, and
  // resnet_cifar's stage shapes at batch 8.
  const std::vector<Shape> shapes = {{2, 1, 3, 3},   {3, 5, 7, 10},   {8, 14, 14, 64}, {32, 28, 28, 3},
                                     {2, 9, 9, 130}, {8, 32, 32, 16}, {8, 16, 16, 32}, {8, 8, 8, 64}};
  for (const Shape& s : shapes) {
    const std::string t = tag(s);
    cases.push_back(make("batchnorm2d_train_" + t, [=](DType d) { return bn_forward(d, s, true); }, 21,
                         {"bn.y", "bn.saved_mean", "bn.saved_invstd", "running_mean", "running_var"}));
    cases.push_back(make("batchnorm2d_infer_" + t, [=](DType d) { return bn_forward(d, s, false); }, 22, {"bn"}));
    cases.push_back(make("batchnorm2d_backward_" + t, [=](DType d) { return bn_backward(d, s, 1e-5, false); }, 23,
                         {"bwd.dx", "bwd.dgamma", "bwd.dbeta"}));
    for (bool residual : {false, true})
      for (bool two : {false, true})
        cases.push_back(make(
            "batchnorm_relu_backward_" + t + (residual ? "_residual" : "") + (two ? "_two_dy" : ""),
            [=](DType d) { return bn_relu_backward(d, s, residual, two); }, 24, brb_outputs(residual)));
    // The packed relu mask (vector path: C a multiple of 8; scalar path: C = 3 and 10), and the
    // mask recomputed from conv_out through the affine: cuda's forms (the cpu backend holds no i32
    // mask and refuses the affine form, saying so; cpu_ref runs both).
    for (bool two : {false, true}) {
      OpCase packed = make(
          "batchnorm_relu_backward_packed_mask_" + t + (two ? "_two_dy" : ""),
          [=](DType d) { return bn_relu_backward(d, s, true, two, true); }, 27, brb_outputs(true));
      OpCase affine = make(
          "batchnorm_relu_backward_affine_" + t + (two ? "_two_dy" : ""),
          [=](DType d) { return bn_relu_backward(d, s, true, two, false, true); }, 28, brb_outputs(true));
      packed.backends = affine.backends = {"cuda"};
      cases.push_back(std::move(packed));
      cases.push_back(std::move(affine));
    }
  }

  // The backward routing a max pooling's gradient itself (fold_maxpool_gradient): VGG's tiling
  // 2×2 windows and ResNet's overlapping 3×3 stride-2 padded ones, over the vector path (C = 8,
  // 64), the scalar path (C = 10) and an odd height; each mask form, ± the stored residual
  // gradient. cuda's form (cpu_ref runs it as its decomposition, the cpu backend refuses it).
  const Attrs tiling{{"kernel", Shape{2, 2}}, {"stride", Shape{2, 2}}, {"padding", Shape{0, 0}}};
  const Attrs overlapping{{"kernel", Shape{3, 3}}, {"stride", Shape{2, 2}}, {"padding", Shape{1, 1}}};
  for (const Shape& s : {Shape{2, 8, 8, 8}, Shape{3, 7, 7, 10}, Shape{4, 14, 14, 64}})
    for (const auto& [form, window] : {std::pair{"tiling", tiling}, std::pair{"overlapping", overlapping}}) {
      if (form == std::string("tiling") && s[1] % 2 != 0) continue;
      for (int mask : {0, 1, 2})
        for (bool residual : {false, true}) {
          const Attrs w = window;
          OpCase c = make("batchnorm_relu_backward_pooled_" + std::string(form) + "_" + tag(s) + "_mask" +
                              std::to_string(mask) + (residual ? "_residual" : ""),
                          [=](DType d) { return bn_relu_backward_pooled(d, s, w, residual, mask); }, 31,
                          brb_outputs(residual));
          c.backends = {"cuda"};
          cases.push_back(std::move(c));
        }
    }

  // fold_batchnorm: odd kernel shapes per element (eps 1e-3, the running variance positive), and K
  // = 3, 10, 64 on the cuda kernels' tiles.
  for (const Shape& ws : {Shape{8, 3, 3, 4}, Shape{16, 1, 1, 16}, Shape{5, 7, 7, 3}})
    for (bool bias : {false, true}) {
      OpCase c = per_element("fold_batchnorm_" + tag(ws) + (bias ? "_bias" : ""),
                             [=](DType d) {
                               ir::Graph g;
                               const Shape ch{ws[0]};
                               std::vector<int> in{g.add_parameter("w", ws, {}, d)};
                               for (const char* n : {"gamma", "beta", "running_mean", "running_var"})
                                 in.push_back(g.add_parameter(n, ch, {}, d));
                               if (bias) in.push_back(g.add_parameter("b", ch, {}, d));
                               g.add_node("fold_batchnorm", in, {{"eps", 1e-3}}, "fold");
                               return g;
                             },
                             {"running_var"});
      cases.push_back(std::move(c));
    }
  for (bool bias : {false, true})
    for (int64_t K : {3, 10, 64}) {
      OpCase c =
          make("fold_batchnorm_K" + std::to_string(K) + (bias ? "_bias" : ""),
               [=](DType d) {
                 ir::Graph g;
                 const Shape k{K};
                 std::vector<int> in{g.add_parameter("w", {K, 3, 3, 5}, {}, d), g.add_parameter("gamma", k, {}, d),
                                     g.add_parameter("beta", k, {}, d), g.add_state("running_mean", k, {}, d),
                                     g.add_state("running_var", k, {}, d)};
                 if (bias) in.push_back(g.add_parameter("b", k, {}, d));
                 g.add_node("fold_batchnorm", in, {{"eps", 1e-5}}, "fold");
                 return g;
               },
               25, {"fold.w_folded", "fold.b_folded"});
      c.dtypes = {DType::f32};
      cases.push_back(std::move(c));
    }
  // bn_apply: the block-end apply of defer_bn_apply, [relu] x·scale + shift from an f32 affine,
  // in every float dtype, with and without the relu, over channel counts that fill a vector or not.
  for (bool relu : {true, false})
    for (const Shape& s : {Shape{2, 5, 5, 16}, Shape{3, 4, 7, 10}}) {
      cases.push_back(scaled_case(
          std::string("bn_apply_") + (relu ? "relu_" : "") + tag(s),
          [=](DType d) {
            ir::Graph g;
            g.add_node("bn_apply", {g.add_input("x", s, d), g.add_input("affine", {2, s[3]})},
                       {{"relu", int64_t{relu}}}, "apply");
            return g;
          },
          26, kAllFloat));
    }
}

}  // namespace trident::test_support::op_family
