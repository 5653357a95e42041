// Reference kernels of the fused CBR ops, run as their decomposition: the same reference
// kernels, in the same order, on the fused node's own buffers. The batchnorm result is
// written into y and the add and relu run in place there, so the forward needs no scratch.
#include <memory>
#include <vector>

#include "backends/cpu_ref/kernels.h"
#include "core/error.h"

namespace trident::cpu_ref {

namespace {

ir::Node sub_node(const ir::Node& fused, const std::string& op, ir::Attrs attrs) {
  ir::Node n;
  n.op = op;
  n.name = fused.name + "." + op;
  n.attrs = std::move(attrs);
  return n;
}

ir::Attrs pick(const ir::Attrs& from, std::initializer_list<const char*> keys) {
  ir::Attrs out;
  for (const char* k : keys)
    if (from.has(k)) out.set(k, from.items().at(k));
  return out;
}

// cbr / cbar: inputs x, w, gamma, beta, running_mean, running_var, [residual], [bias];
// outputs y, conv_out, saved_mean, saved_invstd, running_mean_out, running_var_out,
// [relu_mask: y > 0 packed to bits].
class FusedForward final : public Kernel {
 public:
  explicit FusedForward(const ir::Node& n)
      : cbar_(n.op == "cbar"),
        conv_(sub_node(n, "conv2d", pick(n.attrs, {"stride", "padding", "dilation", "groups"}))),
        bn_(sub_node(n, "batchnorm2d", pick(n.attrs, {"eps", "momentum"}))),
        add_(sub_node(n, "add", {})),
        relu_(sub_node(n, "relu", {})) {
    bn_.attrs.set("training", int64_t{1});
  }

  void run(const KernelArgs& a) override {
    const TensorView &y = a.out[0], &conv_out = a.out[1];
    const size_t with_bias = cbar_ ? 8 : 7;
    std::vector<TensorView> conv_in{a.in[0], a.in[1]};
    if (a.in.size() == with_bias) conv_in.push_back(a.in.back());
    conv2d({conv_, conv_in, {conv_out}});
    batchnorm2d({bn_, {conv_out, a.in[2], a.in[3], a.in[4], a.in[5]},
                 {y, a.out[2], a.out[3], a.out[4], a.out[5]}});
    if (cbar_) add({add_, {y, a.in[6]}, {y}});
    relu({relu_, {y}, {y}});
    if (a.out.size() == 7) pack_relu_mask(a, y, a.out[6]);
  }

 private:
  bool cbar_;
  ir::Node conv_, bn_, add_, relu_;
};

// batchnorm_relu_backward: inputs mask (y, or its packed bits), dy, conv_out, gamma,
// saved_mean, saved_invstd, [dy_other]; outputs dconv, dgamma, dbeta, [dresidual]. The
// gradient dy (+ dy_other, added first as the add op does) is masked, dz = dy·(y > 0), into
// dresidual when there is one (it is exactly the residual's gradient), else into a scratch
// tensor made once.
class FusedBackward final : public Kernel {
 public:
  FusedBackward(const ir::Node& n, const ir::Graph& g)
      : add_(sub_node(n, "add", {})),
        relu_bwd_(sub_node(n, "relu_backward", {})),
        bn_bwd_(sub_node(n, "batchnorm2d_backward", pick(n.attrs, {"eps"}))) {
    if (n.outputs.size() == 3) {
      const ir::Value& v = g.value(n.inputs[1]);
      scratch_.resize(static_cast<size_t>(numel(v.shape)) * dtype_size(v.dtype));
    }
  }

  void run(const KernelArgs& a) override {
    TensorView dz = a.out.size() == 4 ? a.out[3] : TensorView{scratch_.data(), a.in[1].shape, a.in[1].dtype};
    // Two gradients: their sum is made in dz and masked there in place (element by element).
    TensorView dy = a.in[1];
    if (a.in.size() == 7) {
      add({add_, {a.in[1], a.in[6]}, {dz}});
      dy = dz;
    }
    if (a.in[0].dtype == DType::i32) apply_relu_mask(a, a.in[0], dy, dz);
    else relu_backward({relu_bwd_, {a.in[0], dy}, {dz}});
    batchnorm2d_backward({bn_bwd_, {a.in[2], dz, a.in[3], a.in[4], a.in[5]}, {a.out[0], a.out[1], a.out[2]}});
  }

 private:
  ir::Node add_, relu_bwd_, bn_bwd_;
  std::vector<std::byte> scratch_;
};

}  // namespace

std::unique_ptr<Kernel> make_fused_forward(const ir::Node& n, const ir::Graph&) {
  return std::make_unique<FusedForward>(n);
}

std::unique_ptr<Kernel> make_fused_backward(const ir::Node& n, const ir::Graph& g) {
  return std::make_unique<FusedBackward>(n, g);
}

}  // namespace trident::cpu_ref
