// Reference kernels of the inference fusions: batchnorm folding as the formula of
// docs/OPS.md in f64 arithmetic, and conv2d_epilogue as its decomposition (conv, then the
// add and relu in place on the output).
#include <cmath>
#include <memory>

#include "backends/cpu_ref/kernels.h"
#include "core/error.h"

namespace trident::cpu_ref {

namespace {

template <class T>
void fold(const KernelArgs& a) {
  const TensorView& w = a.in[0];
  const int64_t K = w.shape[0], per_k = w.numel() / K;
  const double eps = a.node.attrs.f("eps", 1e-5);
  const T *W = w.as<T>(), *gamma = a.in[1].as<T>(), *beta = a.in[2].as<T>(), *mean = a.in[3].as<T>(),
          *var = a.in[4].as<T>();
  const T* bias = a.in.size() == 6 ? a.in[5].as<T>() : nullptr;
  T *Wf = a.out[0].as<T>(), *Bf = a.out[1].as<T>();
  for (int64_t k = 0; k < K; ++k) {
    const double scale = static_cast<double>(gamma[k]) / std::sqrt(static_cast<double>(var[k]) + eps);
    for (int64_t i = 0; i < per_k; ++i) Wf[k * per_k + i] = static_cast<T>(W[k * per_k + i] * scale);
    const double b = bias ? static_cast<double>(bias[k]) : 0.0;
    Bf[k] = static_cast<T>((b - mean[k]) * scale + beta[k]);
  }
}

void fold_batchnorm(const KernelArgs& a) {
  switch (a.in[0].dtype) {
    case DType::f32: return fold<float>(a);
    case DType::f64: return fold<double>(a);
    default:
      throw Error("node '" + a.node.name + "' (fold_batchnorm): dtype " +
                  std::string(dtype_name(a.in[0].dtype)) + " is not supported by cpu_ref");
  }
}

class ConvEpilogue final : public Kernel {
 public:
  explicit ConvEpilogue(const ir::Node& n) : residual_(n.attrs.i("residual", 0)), relu_(n.attrs.i("relu", 0)) {
    conv_.op = "conv2d";
    conv_.name = n.name + ".conv";
    for (const char* k : {"stride", "padding", "dilation", "groups"})
      if (n.attrs.has(k)) conv_.attrs.set(k, n.attrs.items().at(k));
    add_.op = "add";
    add_.name = n.name + ".add";
    relu_node_.op = "relu";
    relu_node_.name = n.name + ".relu";
  }

  void run(const KernelArgs& a) override {
    const TensorView& y = a.out[0];
    std::vector<TensorView> conv_in(a.in.begin(), a.in.end() - (residual_ ? 1 : 0));
    // When y shares the residual's buffer (inplace_residual), the convolution goes to a
    // scratch tensor first so it does not overwrite the residual before the add reads it.
    const bool in_place = residual_ && a.in.back().data == y.data;
    TensorView conv_out = y;
    if (in_place) {
      scratch_.resize(y.bytes());
      conv_out.data = scratch_.data();
    }
    conv2d({conv_, conv_in, {conv_out}});
    if (residual_) add({add_, {conv_out, a.in.back()}, {y}});
    if (relu_) relu({relu_node_, {y}, {y}});
  }

 private:
  bool residual_, relu_;
  ir::Node conv_, add_, relu_node_;
  std::vector<std::byte> scratch_;  // sized on first in-place run, then reused
};

}  // namespace

void register_fused_inference_kernels() {
  KernelRegistry::add_fn("cpu_ref", "fold_batchnorm", fold_batchnorm);
  KernelRegistry::add("cpu_ref", "conv2d_epilogue", [](const ir::Node& n, const ir::Graph&, BackendContext&) {
    return std::unique_ptr<Kernel>(std::make_unique<ConvEpilogue>(n));
  });
}

}  // namespace trident::cpu_ref
