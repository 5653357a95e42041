// Reference kernels of the fused CBR ops, run as their decomposition: the same reference
// kernels, in the same order, on the fused node's own buffers. The batchnorm result is
// written into y and the add and relu run in place there, so the forward needs no scratch.
#include <memory>
#include <vector>

#include "backends/cpu_ref/kernels.h"
#include "core/error.h"
#include "ops/cbr_operands.h"

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

// cbr / cbar / conv_bn_stats: operands as ops/cbr_operands.h lays them out. With a prologue
// the convolution reads bn_apply(x, x_affine), made in a scratch tensor; with a residual
// affine, cbar adds bn_apply(residual, residual_affine, relu = 0), also made in scratch; conv_bn_stats
// writes the batchnorm's result to scratch and outputs its affine (batchnorm_affine) instead.
class FusedForward final : public Kernel {
 public:
  FusedForward(const ir::Node& n, const ir::Graph& g)
      : cbar_(n.op == "cbar"),
        stats_only_(n.op == "conv_bn_stats"),
        operands_(ops::cbr_operands(n)),
        conv_(sub_node(n, "conv2d", pick(n.attrs, {"stride", "padding", "dilation", "groups"}))),
        bn_(sub_node(n, "batchnorm2d", pick(n.attrs, {"eps", "momentum"}))),
        add_(sub_node(n, "add", {})),
        relu_(sub_node(n, "relu", {})),
        affine_(sub_node(n, "batchnorm_affine", pick(n.attrs, {"eps"}))) {
    bn_.attrs.set("training", int64_t{1});
    const auto bytes = [&](int value) {
      const ir::Value& v = g.value(value);
      return static_cast<size_t>(numel(v.shape)) * dtype_size(v.dtype);
    };
    if (operands_.x_affine >= 0) activated_.resize(bytes(n.inputs[ops::cbr_in::x]));
    if (operands_.residual_affine >= 0) shortcut_.resize(bytes(n.inputs[operands_.residual]));
    if (stats_only_) normalized_.resize(bytes(n.outputs[ops::cbr_out::conv_out]));
  }

  void run(const KernelArgs& a) override {
    const TensorView& conv_out = a.out[ops::cbr_out::conv_out];
    TensorView x = a.in[ops::cbr_in::x];
    if (operands_.x_affine >= 0) {
      const TensorView activated{activated_.data(), x.shape, x.dtype};
      apply_bn(a, x, a.in[operands_.x_affine], activated, true);
      x = activated;
    }
    std::vector<TensorView> conv_in{x, a.in[ops::cbr_in::w]};
    if (operands_.bias >= 0) conv_in.push_back(a.in[operands_.bias]);
    conv2d({conv_, conv_in, {conv_out}});
    const TensorView y = stats_only_ ? TensorView{normalized_.data(), conv_out.shape, conv_out.dtype} : a.out[0];
    batchnorm2d({bn_, {conv_out, a.in[2], a.in[3], a.in[4], a.in[5]}, {y, a.out[2], a.out[3], a.out[4], a.out[5]}});
    if (stats_only_) {
      batchnorm_affine({affine_, {conv_out, a.in[2], a.in[3]}, {a.out[ops::cbr_out::affine]}});
      return;
    }
    TensorView residual = cbar_ ? a.in[operands_.residual] : TensorView{};
    if (operands_.residual_affine >= 0) {
      const TensorView applied{shortcut_.data(), residual.shape, residual.dtype};
      apply_bn(a, residual, a.in[operands_.residual_affine], applied, false);
      residual = applied;
    }
    if (cbar_) add({add_, {y, residual}, {y}});
    relu({relu_, {y}, {y}});
    if (a.out.size() == 7) pack_relu_mask(a, y, a.out[6]);
  }

 private:
  bool cbar_, stats_only_;
  ops::CbrOperands operands_;
  ir::Node conv_, bn_, add_, relu_, affine_;
  std::vector<std::byte> activated_, normalized_, shortcut_;
};

// batchnorm_relu_backward: inputs mask (y, its packed bits, or the affine that recomputes y
// from conv_out into dz before dz is overwritten), dy, conv_out, gamma,
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
    const ir::Value& v = g.value(n.inputs[1]);
    const size_t bytes = static_cast<size_t>(numel(v.shape)) * dtype_size(v.dtype);
    if (n.outputs.size() == 3) scratch_.resize(bytes);
    if (g.value(n.inputs[0]).shape.size() == 2) recomputed_.resize(bytes);
  }

  void run(const KernelArgs& a) override {
    TensorView dz = a.out.size() == 4 ? a.out[3] : TensorView{scratch_.data(), a.in[1].shape, a.in[1].dtype};
    // Two gradients: their sum is made in dz and masked there in place (element by element).
    TensorView dy = a.in[1];
    if (a.in.size() == 7) {
      add({add_, {a.in[1], a.in[6]}, {dz}});
      dy = dz;
    }
    if (a.in[0].dtype == DType::i32) {
      apply_relu_mask(a, a.in[0], dy, dz);
    } else if (a.in[0].shape.size() == 2) {
      // y recomputed from the affine: into its own scratch, since dz may already hold dy.
      const TensorView y{recomputed_.data(), a.in[2].shape, a.in[2].dtype};
      apply_bn(a, a.in[2], a.in[0], y, true);
      relu_backward({relu_bwd_, {y, dy}, {dz}});
    } else {
      relu_backward({relu_bwd_, {a.in[0], dy}, {dz}});
    }
    batchnorm2d_backward({bn_bwd_, {a.in[2], dz, a.in[3], a.in[4], a.in[5]}, {a.out[0], a.out[1], a.out[2]}});
  }

 private:
  ir::Node add_, relu_bwd_, bn_bwd_;
  std::vector<std::byte> scratch_, recomputed_;
};

}  // namespace

std::unique_ptr<Kernel> make_fused_forward(const ir::Node& n, const ir::Graph& g) {
  return std::make_unique<FusedForward>(n, g);
}

std::unique_ptr<Kernel> make_fused_backward(const ir::Node& n, const ir::Graph& g) {
  return std::make_unique<FusedBackward>(n, g);
}

}  // namespace trident::cpu_ref
