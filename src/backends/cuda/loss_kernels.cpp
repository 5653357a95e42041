// The cuda backend's loss family: softmax_cross_entropy and its backward. Shapes and dtypes
// are checked when the kernel is built (labels are i32 [N]); the forward reserves N doubles
// of workspace for the per-row losses that its batch-mean kernel adds in a fixed order.
#include <memory>

#include "backends/cuda/device/loss.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"

namespace trident::cuda {

namespace {

using device::ElemType;

struct LossShape {
  int64_t N = 0, K = 0;
  ElemType logits = ElemType::f32;
};

LossShape check_logits_and_labels(const ir::Node& node, const ir::Graph& g) {
  const ir::Value &logits = input_value(node, g, 0), &labels = input_value(node, g, 1);
  if (logits.shape.size() != 2) fail(node, "logits must be [N, K], got " + shape_str(logits.shape));
  LossShape s{logits.shape[0], logits.shape[1], elem_of(node, logits, "logits")};
  if (s.K < 1) fail(node, "logits need at least one class");
  if (labels.dtype != DType::i32) fail(node, "labels '" + labels.name + "' must be i32");
  expect_shape(node, labels, Shape{s.N}, "labels");
  return s;
}

class SoftmaxCrossEntropy final : public Kernel {
 public:
  SoftmaxCrossEntropy(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 2, 2, 1, 1);
    shape_ = check_logits_and_labels(node, g);
    const ir::Value& loss = output_value(node, g, 0);
    expect_shape(node, loss, Shape{1}, "loss");
    loss_type_ = elem_of(node, loss, "loss");
    ctx.reserve_workspace(0, device::softmax_cross_entropy_workspace(shape_.N));
    smoothing_ = static_cast<float>(node.attrs.f("label_smoothing", 0.0));
  }

  void run(const KernelArgs& a) override {
    device::launch_softmax_cross_entropy(shape_.logits, a.in[0].data, a.in[1].as<const int32_t>(), shape_.N, shape_.K,
                                         smoothing_, a.out[0].data, loss_type_, ctx_.workspace(0), ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  LossShape shape_;
  ElemType loss_type_ = ElemType::f32;
  float smoothing_ = 0;  // label smoothing ε
};

class SoftmaxCrossEntropyBackward final : public Kernel {
 public:
  SoftmaxCrossEntropyBackward(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx) {
    expect_arity(node, 3, 3, 1, 1);
    shape_ = check_logits_and_labels(node, g);
    const ir::Value& dloss = input_value(node, g, 2);
    expect_shape(node, dloss, Shape{1}, "dloss");
    dloss_type_ = elem_of(node, dloss, "dloss");
    const ir::Value &logits = input_value(node, g, 0), &dlogits = output_value(node, g, 0);
    expect_dtype(node, dlogits, logits.dtype, "dlogits");
    expect_shape(node, dlogits, logits.shape, "dlogits");
    smoothing_ = static_cast<float>(node.attrs.f("label_smoothing", 0.0));
  }

  void run(const KernelArgs& a) override {
    device::launch_softmax_cross_entropy_backward(shape_.logits, a.in[0].data, a.in[1].as<const int32_t>(), shape_.N,
                                                  shape_.K, smoothing_, a.in[2].data, dloss_type_, a.out[0].data,
                                                  ctx_.stream());
  }

 private:
  CudaContext& ctx_;
  LossShape shape_;
  ElemType dloss_type_ = ElemType::f32;
  float smoothing_ = 0;
};

}  // namespace

void register_loss_kernels() {
  add_kernel<SoftmaxCrossEntropy>("softmax_cross_entropy");
  add_kernel<SoftmaxCrossEntropyBackward>("softmax_cross_entropy_backward");
}

}  // namespace trident::cuda
