// The point-wise activations (ops/activation_math.h) on the "cpu" backend. Their reference
// loops call expf, erff or tanhf per element behind a switch, which the compiler cannot
// vectorise: in EfficientNet-B0's inference the sigmoids alone took 60 % of the time. Where
// oneDNN has the function — sigmoid (logistic), SiLU (swish, α = 1), hardswish, GELU (exact and
// tanh) — its jit eltwise primitive runs it, forward and backward from x; hardsigmoid and
// clip's backward stay on cpu_ref's loop. oneDNN's exp, erf and tanh are its own, so results
// agree with the reference formulas to a few units in the last place, not bit for bit.
#include <optional>

#include "backends/cpu/ref_kernels.h"
#include "ops/activation.h"

namespace trident::cpu {

using dnnl::algorithm;

std::optional<std::pair<algorithm, float>> onednn_activation(ops::ActivationFn fn) {
  switch (fn) {
    case ops::ActivationFn::sigmoid: return std::pair{algorithm::eltwise_logistic, 0.f};
    case ops::ActivationFn::silu: return std::pair{algorithm::eltwise_swish, 1.f};
    case ops::ActivationFn::hardswish: return std::pair{algorithm::eltwise_hardswish, 0.f};
    case ops::ActivationFn::gelu: return std::pair{algorithm::eltwise_gelu_erf, 0.f};
    case ops::ActivationFn::gelu_tanh: return std::pair{algorithm::eltwise_gelu_tanh, 0.f};
    default: return std::nullopt;
  }
}

namespace {

dnnl::eltwise_forward::primitive_desc forward_pd(const memory::desc& md, algorithm alg, float alpha) {
  dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_training, alg, md, alpha, 0.f);
  return dnnl::eltwise_forward::primitive_desc(d, user_scratchpad_attr(), OnednnContext::instance().engine());
}

// activation (x → y) or activation_backward (x, dy → dx), every tensor a flat f32 vector.
class EltwiseActivation final : public PrimitiveKernel {
 public:
  EltwiseActivation(const ir::Node& node, const ir::Graph& g, algorithm alg, float alpha)
      : PrimitiveKernel(node, g) {
    expect_f32(node, g);
    const int64_t n = common_numel(node, g);
    const memory::desc md = flat_md(n);
    const bool backward = node.op == "activation_backward";
    const std::string sig = Signature(backward ? "activation_bwd" : "activation")
                                .add("n", n)
                                .add("alg", static_cast<int64_t>(alg))
                                .add("alpha", static_cast<double>(alpha))
                                .str();
    OnednnContext& onednn = OnednnContext::instance();
    if (!backward) {
      add_step(onednn.get(sig, [&] { return forward_pd(md, alg, alpha); }))
          .bind(DNNL_ARG_SRC, md, in(0))
          .bind(DNNL_ARG_DST, md, out(0));
      return;
    }
    add_step(onednn.get(sig, [&] {
      dnnl::eltwise_backward::desc d(alg, md, md, alpha, 0.f);
      return dnnl::eltwise_backward::primitive_desc(d, user_scratchpad_attr(), onednn.engine(),
                                                    forward_pd(md, alg, alpha));
    }))
        .bind(DNNL_ARG_SRC, md, in(0))
        .bind(DNNL_ARG_DIFF_DST, md, in(1))
        .bind(DNNL_ARG_DIFF_SRC, md, out(0));
  }
};

std::unique_ptr<Kernel> make_activation(const ir::Node& node, const ir::Graph& g, const CpuContext&) {
  const auto onednn = onednn_activation(ops::activation_params(node.attrs).fn);
  if (onednn) return std::make_unique<EltwiseActivation>(node, g, onednn->first, onednn->second);
  if (node.op == "activation_backward") return std::make_unique<RefLoop<cpu_ref::activation_backward>>(node, g);
  return std::make_unique<RefLoop<cpu_ref::activation>>(node, g);
}

}  // namespace

void register_activation_kernels() {
  add_factory("activation", make_activation);
  add_factory("activation_backward", make_activation);
}

}  // namespace trident::cpu
