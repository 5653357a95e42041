// linear and its data/weight gradients on oneDNN inner_product primitives. x [N,I] and
// w [O,I] are plain row-major matrices (tags ab), which the GEMM-based inner product takes
// as is, so no weight reorders are needed here (unlike convolution).
#include "backends/cpu/kernels.h"
#include "backends/cpu/onednn_util.h"

namespace trident::cpu {

namespace {

using dnnl::inner_product_backward_data;
using dnnl::inner_product_backward_weights;
using dnnl::inner_product_forward;

struct LinearSetup {
  memory::desc x, w, b, y;  // [N,I], [O,I], [O] (empty without bias), [N,O]
  std::string sig;
};

LinearSetup linear_setup(const ir::Node& node, const Shape& x, const Shape& w, const Shape& y,
                         bool has_bias) {
  if (x.size() != 2 || w.size() != 2 || y.size() != 2 || w[1] != x[1] || y[0] != x[0] ||
      y[1] != w[0])
    fail(node, "shapes x" + shape_str(x) + " w" + shape_str(w) + " y" + shape_str(y) +
                   " do not agree");
  LinearSetup s{plain_md(x), plain_md(w), {}, plain_md(y), ""};
  if (has_bias) s.b = plain_md({w[0]});
  s.sig = Signature("linear").add("x", x).add("w", w).add("bias", int64_t{has_bias}).str();
  return s;
}

inner_product_forward::primitive_desc forward_pd(const LinearSetup& s) {
  inner_product_forward::desc d(dnnl::prop_kind::forward_training, s.x, s.w, s.b, s.y);
  return inner_product_forward::primitive_desc(d, user_scratchpad_attr(),
                                               OnednnContext::instance().engine());
}

class Linear final : public PrimitiveKernel {
 public:
  Linear(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    const bool has_bias = node.inputs.size() == 3;
    const LinearSetup s = linear_setup(node, in_shape(node, g, 0), in_shape(node, g, 1),
                                       out_shape(node, g, 0), has_bias);
    Step& step = add_step(OnednnContext::instance().get(s.sig + "|fwd", [&] { return forward_pd(s); }));
    step.view(DNNL_ARG_SRC, s.x, in(0)).view(DNNL_ARG_WEIGHTS, s.w, in(1)).view(DNNL_ARG_DST, s.y, out(0));
    if (has_bias) step.view(DNNL_ARG_BIAS, s.b, in(2));
  }
};

// linear_backward_data(dy, w) → dx = dy·w
class LinearBackwardData final : public PrimitiveKernel {
 public:
  LinearBackwardData(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    const LinearSetup s = linear_setup(node, out_shape(node, g, 0), in_shape(node, g, 1),
                                       in_shape(node, g, 0), false);
    add_step(OnednnContext::instance().get(s.sig + "|bwd_data", [&] {
      inner_product_backward_data::desc d(s.x, s.w, s.y);
      return inner_product_backward_data::primitive_desc(
          d, user_scratchpad_attr(), OnednnContext::instance().engine(), forward_pd(s));
    }))
        .view(DNNL_ARG_DIFF_DST, s.y, in(0))
        .view(DNNL_ARG_WEIGHTS, s.w, in(1))
        .view(DNNL_ARG_DIFF_SRC, s.x, out(0));
  }
};

// linear_backward_weight(x, dy) → dw = dyᵀ·x, db = Σ_n dy
class LinearBackwardWeight final : public PrimitiveKernel {
 public:
  LinearBackwardWeight(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    const bool has_bias = node.outputs.size() == 2;
    if (has_bias != (node.attrs.i("has_bias", has_bias ? 1 : 0) != 0))
      fail(node, "attribute has_bias disagrees with the number of outputs");
    const LinearSetup s = linear_setup(node, in_shape(node, g, 0), out_shape(node, g, 0),
                                       in_shape(node, g, 1), has_bias);
    Step& step = add_step(OnednnContext::instance().get(s.sig + "|bwd_weights", [&] {
      inner_product_backward_weights::desc d(s.x, s.w, s.b, s.y);
      return inner_product_backward_weights::primitive_desc(
          d, user_scratchpad_attr(), OnednnContext::instance().engine(), forward_pd(s));
    }));
    step.view(DNNL_ARG_SRC, s.x, in(0))
        .view(DNNL_ARG_DIFF_DST, s.y, in(1))
        .view(DNNL_ARG_DIFF_WEIGHTS, s.w, out(0));
    if (has_bias) step.view(DNNL_ARG_DIFF_BIAS, s.b, out(1));
  }
};

}  // namespace

void register_linear_kernels() {
  add_kernel<Linear>("linear");
  add_kernel<LinearBackwardData>("linear_backward_data");
  add_kernel<LinearBackwardWeight>("linear_backward_weight");
}

}  // namespace trident::cpu
