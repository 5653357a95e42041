// A training batchnorm's normalisation as data: batchnorm_affine gives the per-channel affine
// [2, C] f32 that a training batchnorm of x applies (row 0 scale = γ·invstd, row 1 shift =
// β − μ·invstd·γ, from the batch statistics of x), and bn_apply applies
// relu(x·scale + shift) (attribute relu = 0: x·scale + shift, a shortcut's batchnorm). They are
// the decomposition of the cross-layer fusion (defer_bn_apply): a producer hands its affine
// to the next convolution, which applies it while reading its input, so the activated tensor
// is never stored.
#include "ops/op_helpers.h"
#include "ops/norm_params.h"

namespace trident::ops {

void expect_affine(const ir::Value& affine, int64_t channels, const std::string& what) {
  if (affine.dtype != DType::f32 || affine.shape != Shape{2, channels})
    throw Error(what + " '" + affine.name + "' must be f32 [2," + std::to_string(channels) + "] (scale, shift), not " +
                std::string(dtype_name(affine.dtype)) + " " + shape_str(affine.shape));
}

void register_bn_apply_ops() {
  ir::OpDef apply = op_def("bn_apply", {"x", "affine"}, {"y"},
                           "relu(x·scale + shift) per channel (relu = 0: without the relu), from an affine [2, C]");
  apply.infer = [](const Node& n, const Graph& g) {
    const ir::Value& x = in_value(g, n, 0);
    expect_rank(x, 4, "input");
    expect_float(x, "input");
    expect_affine(in_value(g, n, 1), x.shape[3], "the affine");
    return std::vector<TypeInfo>{{x.shape, x.dtype}};
  };
  ir::OpRegistry::add(apply);

  ir::OpDef affine = op_def("batchnorm_affine", {"x", "gamma", "beta"}, {"affine"},
                            "the scale and shift a training batchnorm of x applies (batch statistics)");
  affine.infer = [](const Node& n, const Graph& g) {
    const ir::Value& x = in_value(g, n, 0);
    expect_rank(x, 4, "input");
    expect_float(x, "input");
    const Shape c{x.shape[3]};
    for (size_t i = 1; i < 3; ++i)
      if (in_value(g, n, i).shape != c) throw Error("'" + in_value(g, n, i).name + "' must have shape " + shape_str(c));
    NormParams::of(n).check();
    return std::vector<TypeInfo>{{Shape{2, x.shape[3]}, DType::f32}};
  };
  affine.f32_inputs = {"gamma", "beta"};
  ir::OpRegistry::add(affine);
}

}  // namespace trident::ops
