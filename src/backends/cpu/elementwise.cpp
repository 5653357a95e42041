// The element-wise family on the "cpu" backend: relu, relu_backward and add on oneDNN
// eltwise/binary primitives, fill on cpu_ref's loop, and the flatten/reshape views. Element-wise
// ops ignore the shape, so every tensor is described as a flat f32 vector: one primitive serves
// every tensor of the same element count, whatever its rank, and in-place aliasing just works.
#include <cstring>

#include "backends/cpu/ref_kernels.h"

namespace trident::cpu {

namespace {

using dnnl::algorithm;

// A relu, or with relu_max > 0 the relu clipped there (ReLU6): oneDNN's clip_v2, whose backward
// from its output passes dy where 0 < y < relu_max, as the clip's own gradient does.
algorithm relu_algorithm(float relu_max) {
  return relu_max > 0 ? algorithm::eltwise_clip_v2_use_dst_for_bwd : algorithm::eltwise_relu_use_dst_for_bwd;
}

dnnl::eltwise_forward::primitive_desc relu_forward_pd(const memory::desc& md, algorithm alg, float relu_max = 0) {
  dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_training, alg, md, 0.f, relu_max);
  return dnnl::eltwise_forward::primitive_desc(d, user_scratchpad_attr(),
                                               OnednnContext::instance().engine());
}

}  // namespace

int64_t common_numel(const ir::Node& node, const ir::Graph& g) {
  const int64_t n = trident::numel(out_shape(node, g, 0));
  for (int id : node.inputs)
    if (trident::numel(g.value(id).shape) != n)
      fail(node, "inputs and output must hold the same number of elements");
  return n;
}

void append_relu(PrimitiveKernel& k, int64_t n, const Operand& x, const Operand& y, float relu_max) {
  const memory::desc md = flat_md(n);
  k.add_step(OnednnContext::instance().get(Signature("relu").add("n", n).add("max", static_cast<double>(relu_max)).str(), [&] {
     return relu_max > 0 ? relu_forward_pd(md, relu_algorithm(relu_max), relu_max)
                         : relu_forward_pd(md, algorithm::eltwise_relu);
   }))
      .bind(DNNL_ARG_SRC, md, x)
      .bind(DNNL_ARG_DST, md, y);
}

void append_relu_backward(PrimitiveKernel& k, int64_t n, const Operand& y, const Operand& dy,
                          const Operand& dx, float relu_max) {
  const memory::desc md = flat_md(n);
  k.add_step(OnednnContext::instance().get(Signature("relu_bwd_use_dst").add("n", n).add("max", static_cast<double>(relu_max)).str(), [&] {
     const algorithm alg = relu_algorithm(relu_max);
     dnnl::eltwise_backward::desc d(alg, md, md, 0.f, relu_max);
     return dnnl::eltwise_backward::primitive_desc(d, user_scratchpad_attr(), OnednnContext::instance().engine(),
                                                   relu_forward_pd(md, alg, relu_max));
   }))
      .bind(DNNL_ARG_DST, md, y)
      .bind(DNNL_ARG_DIFF_DST, md, dy)
      .bind(DNNL_ARG_DIFF_SRC, md, dx);
}

void append_add(PrimitiveKernel& k, int64_t n, const Operand& a, const Operand& b,
                const Operand& y, bool relu_after) {
  const memory::desc md = flat_md(n);
  k.add_step(OnednnContext::instance().get(Signature(relu_after ? "add_relu" : "add").add("n", n).str(), [&] {
     dnnl::binary::desc d(algorithm::binary_add, md, md, md);
     dnnl::primitive_attr attr = user_scratchpad_attr();
     if (relu_after) {
       dnnl::post_ops ops;
       ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
       attr.set_post_ops(ops);
     }
     return dnnl::binary::primitive_desc(d, attr, OnednnContext::instance().engine());
   }))
      .bind(DNNL_ARG_SRC_0, md, a)
      .bind(DNNL_ARG_SRC_1, md, b)
      .bind(DNNL_ARG_DST, md, y);
}

namespace {

class Relu final : public PrimitiveKernel {
 public:
  Relu(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    append_relu(*this, common_numel(node, g), in(0), out(0));
  }
};

// Our relu_backward reads the forward output y: dx = dy where y > 0.
class ReluBackward final : public PrimitiveKernel {
 public:
  ReluBackward(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    append_relu_backward(*this, common_numel(node, g), in(0), in(1), out(0));
  }
};

class Add final : public PrimitiveKernel {
 public:
  Add(const ir::Node& node, const ir::Graph& g) : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    append_add(*this, common_numel(node, g), in(0), in(1), out(0));
  }
};

// flatten and reshape: views that copy only when the planner did not alias them.
class View final : public Kernel {
 public:
  View(const ir::Node& node, const ir::Graph& g) {
    expect_f32(node, g);
    if (node.inputs.size() != 1 || node.outputs.size() != 1 ||
        trident::numel(in_shape(node, g, 0)) != trident::numel(out_shape(node, g, 0)))
      fail(node, "a view needs one input and one output of the same element count");
  }
  void run(const KernelArgs& args) override {
    const TensorView &x = args.in[0], &y = args.out[0];
    if (x.data != y.data) std::memmove(y.data, x.data, x.bytes());
  }
};

}  // namespace

void register_elementwise_kernels() {
  add_kernel<Relu>("relu");
  add_kernel<ReluBackward>("relu_backward");
  add_kernel<Add>("add");
  add_kernel<RefLoop<cpu_ref::fill>>("fill");
  add_kernel<View>({"flatten", "reshape"});
}

}  // namespace trident::cpu
