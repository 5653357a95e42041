// Max, average and global-average pooling (a window of the whole H×W plane) with backward on
// oneDNN pooling. maxpool2d_backward re-runs the forward into kernel-owned y/workspace, whose
// argmax (first maximum, padding never wins) the backward primitive then follows.
#include "backends/cpu/kernels.h"
#include "backends/cpu/onednn_util.h"

namespace trident::cpu {

namespace {

using dnnl::algorithm;
using dnnl::pooling_backward;
using dnnl::pooling_forward;

struct PoolSetup {
  memory::desc src, dst;  // NHWC input and pooled output
  DnnlWindow geom;
  algorithm alg = algorithm::pooling_max;
  std::string sig;
};

PoolSetup pool_setup(const Shape& x, const Shape& y, algorithm alg, DnnlWindow geom) {
  PoolSetup s{nhwc_md(x), nhwc_md(y), std::move(geom), alg, ""};
  s.sig = Signature("pool")
              .add("alg", static_cast<int64_t>(alg))
              .add("x", x)
              .add("y", y)
              .add("kernel", s.geom.kernel)
              .add("stride", s.geom.strides)
              .add("pad_l", s.geom.pad_l)
              .add("pad_r", s.geom.pad_r)
              .str();
  return s;
}

// Average pooling, counting the padded cells or not as the window says.
PoolSetup avg_setup(const Shape& x, const Shape& y, const DnnlWindow& window) {
  return pool_setup(x, y,
                    window.count_include_pad ? algorithm::pooling_avg_include_padding
                                             : algorithm::pooling_avg_exclude_padding,
                    window);
}

// A global pool's geometry: one window covering the whole plane.
DnnlWindow global_geom(const Shape& x) {
  DnnlWindow g;
  g.kernel = {x[1], x[2]};
  g.strides = {1, 1};
  g.dilates = g.pad_l = g.pad_r = {0, 0};
  return g;
}

pooling_forward::primitive_desc forward_pd(const PoolSetup& s, dnnl::prop_kind prop) {
  const DnnlWindow& g = s.geom;
  pooling_forward::desc d(prop, s.alg, s.src, s.dst, g.strides, g.kernel, g.pad_l, g.pad_r);
  return pooling_forward::primitive_desc(d, user_scratchpad_attr(),
                                         OnednnContext::instance().engine());
}

CachedPrimitive backward_primitive(const PoolSetup& s) {
  return OnednnContext::instance().get(s.sig + "|bwd", [&] {
    const DnnlWindow& g = s.geom;
    pooling_backward::desc d(s.alg, s.src, s.dst, g.strides, g.kernel, g.pad_l, g.pad_r);
    return pooling_backward::primitive_desc(d, user_scratchpad_attr(),
                                            OnednnContext::instance().engine(),
                                            forward_pd(s, dnnl::prop_kind::forward_training));
  });
}

// y = pool(x): maxpool2d, avgpool2d and global_avgpool differ only in algorithm and window.
class PoolForward final : public PrimitiveKernel {
 public:
  PoolForward(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    const Shape &x = in_shape(node, g, 0), &y = out_shape(node, g, 0);
    const PoolSetup s = node.op == "maxpool2d"
                            ? pool_setup(x, y, algorithm::pooling_max, pool_window(node, x, y))
                        : node.op == "avgpool2d"
                            ? avg_setup(x, y, pool_window(node, x, y))
                            : pool_setup(x, y, algorithm::pooling_avg_include_padding,
                                         global_geom(x));
    add_step(OnednnContext::instance().get(s.sig + "|fwd_infer", [&] {
      return forward_pd(s, dnnl::prop_kind::forward_inference);
    }))
        .view(DNNL_ARG_SRC, s.src, in(0))
        .view(DNNL_ARG_DST, s.dst, out(0));
  }
};

// dx from dy alone: avgpool2d_backward and global_avgpool_backward (input_shape = dx's shape).
class AvgPoolBackward final : public PrimitiveKernel {
 public:
  AvgPoolBackward(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    const Shape &dx = out_shape(node, g, 0), &dy = in_shape(node, g, 0);
    const PoolSetup s = node.op == "avgpool2d_backward"
                            ? avg_setup(dx, dy, pool_window(node, dx, dy))
                            : pool_setup(dx, dy, algorithm::pooling_avg_include_padding,
                                         global_geom(dx));
    add_step(backward_primitive(s))
        .view(DNNL_ARG_DIFF_DST, s.dst, in(0))
        .view(DNNL_ARG_DIFF_SRC, s.src, out(0));
  }
};

// maxpool2d_backward(x, dy): forward (training) into owned y + workspace, then backward.
class MaxPoolBackward final : public PrimitiveKernel {
 public:
  MaxPoolBackward(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    const Shape &x = in_shape(node, g, 0), &dy = in_shape(node, g, 1);
    const PoolSetup s = pool_setup(x, dy, algorithm::pooling_max, pool_window(node, x, dy));
    const CachedPrimitive fwd = OnednnContext::instance().get(s.sig + "|fwd_train", [&] {
      return forward_pd(s, dnnl::prop_kind::forward_training);
    });
    const memory y = owned(s.dst), ws = owned(fwd.pd.workspace_desc());
    add_step(fwd).view(DNNL_ARG_SRC, s.src, in(0)).owned(DNNL_ARG_DST, y).owned(DNNL_ARG_WORKSPACE, ws);
    add_step(backward_primitive(s))
        .view(DNNL_ARG_DIFF_DST, s.dst, in(1))
        .owned(DNNL_ARG_WORKSPACE, ws)
        .view(DNNL_ARG_DIFF_SRC, s.src, out(0));
  }
};

}  // namespace

void register_pool_kernels() {
  add_kernel<PoolForward>({"maxpool2d", "avgpool2d", "global_avgpool"});
  add_kernel<MaxPoolBackward>("maxpool2d_backward");
  add_kernel<AvgPoolBackward>({"avgpool2d_backward", "global_avgpool_backward"});
}

}  // namespace trident::cpu
