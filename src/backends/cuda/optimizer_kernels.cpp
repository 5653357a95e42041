// The cuda backend's optimizers: sgd_update and adamw_update over n parameter tensors in one
// launch, one kernel class for both (the optimizer is a parameter, the tensor bookkeeping is
// shared). When the tensors lie end to end in the flat parameter, gradient and state buffers
// (the usual layout), one flat loop covers them all; otherwise a device table of tensor
// pointers, made at construction and refreshed only when the bound pointers change, drives one
// launch. Loss scaling (overflow check, skipped step, new scale) is the same code for both.
// Gradients may be f16/bf16 beside the f32 parameters (fold_gradient_cast).
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/optimizer.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"
#include "ops/optimizer_params.h"

namespace trident::cuda {

namespace {

using device::OptimizerTensor;

// Where one optimizer's operands are (ops/optimizer_params.h), whichever optimizer it is.
struct OperandLayout {
  size_t count = 0;
  int states = 1;            // state tensors per parameter
  size_t first_state = 0;    // input of parameter 0's first state; state k at first_state + k·count
  size_t step = 0;           // AdamW: the step count's input and output
  size_t step_out = 0;
  size_t loss_scale = 0, loss_scale_out = 0;  // then the good-step count
  ops::LossScaling scaling;
  size_t inputs = 0, outputs = 0;
};

class OptimizerUpdate final : public Kernel {
 public:
  OptimizerUpdate(const ir::Node& node, const ir::Graph& g, CudaContext& ctx)
      : ctx_(ctx), node_name_(node.name), adamw_(node.op == "adamw_update") {
    try {
      if (adamw_) {
        const ops::AdamwParams p = ops::adamw_params(node);
        ops_ = {p.count, 2, p.exp_avg(0), p.step(), p.step_out(), p.loss_scale(), p.loss_scale_out(),
                p.scaling, p.inputs(), p.outputs()};
        adamw_hyper_.beta1 = p.beta1;
        adamw_hyper_.beta2 = p.beta2;
        adamw_hyper_.eps = p.eps;
        adamw_hyper_.weight_decay = p.weight_decay;
      } else {
        const ops::SgdParams p = ops::sgd_params(node);
        ops_ = {p.count, 1, p.momentum_buffer(0), 0, 0, p.loss_scale(), p.loss_scale_out(),
                p.scaling, p.inputs(), p.outputs()};
        sgd_hyper_.momentum = static_cast<float>(p.momentum);
        sgd_hyper_.weight_decay = static_cast<float>(p.weight_decay);
        sgd_hyper_.nesterov = p.nesterov;
      }
    } catch (const Error& e) {
      fail(node, e.what());
    }
    const size_t n = ops_.count;
    expect_arity(node, ops_.inputs, ops_.inputs, ops_.outputs, ops_.outputs);
    for (size_t k = 0; k < ops_.scaling.operands(); ++k)
      if (input_value(node, g, ops_.loss_scale + k).dtype != DType::f32)
        fail(node, "the loss scale and good-step count must be f32");
    const ir::Value& lr = input_value(node, g, 0);
    if (lr.dtype != DType::f32 || numel(lr.shape) != 1) fail(node, "the learning rate must be one f32 value");
    if (adamw_) {
      const ir::Value& step = input_value(node, g, ops_.step);
      if (step.dtype != DType::f32 || numel(step.shape) != 1) fail(node, "the step count must be one f32 value");
    }
    for (size_t t = 0; t < n; ++t) {
      const ir::Value& p = input_value(node, g, 1 + t);
      // The gradient may be f16/bf16 (fold_gradient_cast); the kernels widen it as they load it.
      const ir::Value& grad = input_value(node, g, 1 + n + t);
      expect_shape(node, grad, p.shape, "gradient");
      grad_types_.push_back(elem_of(node, grad, "gradient"));
      std::vector<const ir::Value*> all{&p, &output_value(node, g, t)};
      for (int k = 0; k < ops_.states; ++k) {
        all.push_back(&input_value(node, g, ops_.first_state + k * n + t));
        all.push_back(&output_value(node, g, (1 + k) * n + t));
      }
      for (const ir::Value* v : all) {
        if (v->dtype != DType::f32)
          fail(node, "'" + v->name + "' is " + std::string(dtype_name(v->dtype)) +
                         "; the cuda optimizers keep parameters and their state in f32");
        expect_shape(node, *v, p.shape, "parameter, gradient or optimizer state tensor");
      }
    }
    host_table_.resize(n);
    table_ = static_cast<OptimizerTensor*>(ctx.allocate(sizeof(OptimizerTensor) * n));
    if (ops_.scaling.on) flag_ = static_cast<int*>(ctx.allocate(sizeof(int)));
  }

  ~OptimizerUpdate() override {
    ctx_.free(table_);
    if (flag_) ctx_.free(flag_);
  }
  OptimizerUpdate(const OptimizerUpdate&) = delete;
  OptimizerUpdate& operator=(const OptimizerUpdate&) = delete;

  void run(const KernelArgs& a) override {
    const size_t n = ops_.count;
    const float* lr = a.in[0].as<const float>();
    std::vector<OptimizerTensor> now(n);
    int64_t chunks = 0;
    for (size_t t = 0; t < n; ++t) {
      const int64_t numel = a.in[1 + t].numel();
      OptimizerTensor& d = now[t];
      d = {a.in[1 + t].as<const float>(), a.in[1 + n + t].data, grad_types_[t], {nullptr, nullptr},
           a.out[t].as<float>(), {nullptr, nullptr}, numel, chunks};
      for (int k = 0; k < ops_.states; ++k) {
        d.state[k] = a.in[ops_.first_state + k * n + t].as<const float>();
        d.state_out[k] = a.out[(1 + k) * n + t].as<float>();
      }
      chunks += (numel + device::kOptimizerChunk - 1) / device::kOptimizerChunk;
    }
    device::LossScaleView scaling;
    if (ops_.scaling.on) scaling = {a.in[ops_.loss_scale].as<const float>(), flag_};
    device::SgdHyper sgd = sgd_hyper_;
    device::AdamwHyper adamw = adamw_hyper_;
    sgd.scaling = adamw.scaling = scaling;
    if (adamw_) adamw.step = a.in[ops_.step].as<const float>();
    if (OptimizerTensor all; end_to_end(now, all)) {
      if (ops_.scaling.on) device::launch_find_nonfinite_flat(all, flag_, ctx_.stream());
      if (adamw_) device::launch_adamw_flat(lr, all, adamw, ctx_.stream());
      else device::launch_sgd_flat(lr, all, sgd, ctx_.stream());
      after_step(a);
      return;
    }
    if (!table_uploaded_ || !same_pointers(now, host_table_)) {
      host_table_ = std::move(now);
      // Pageable source: the copy has taken the bytes when the call returns.
      check(cudaMemcpyAsync(table_, host_table_.data(), sizeof(OptimizerTensor) * n, cudaMemcpyHostToDevice,
                            ctx_.stream()),
            "uploading the tensor table of optimizer node '" + node_name_ + "'");
      table_uploaded_ = true;
    }
    const int count = static_cast<int>(n);
    if (ops_.scaling.on) device::launch_find_nonfinite_table(table_, count, chunks, flag_, ctx_.stream());
    if (adamw_) device::launch_adamw_table(lr, table_, count, chunks, adamw, ctx_.stream());
    else device::launch_sgd_table(lr, table_, count, chunks, sgd, ctx_.stream());
    after_step(a);
  }

 private:
  // Whether the tensors follow each other without gaps in all their buffers; if so, `all`
  // describes the whole run.
  bool end_to_end(const std::vector<OptimizerTensor>& ts, OptimizerTensor& all) const {
    // Compared as addresses: the pointers name device memory, never dereferenced here.
    auto follows = [](const void* p, const void* base, int64_t elements, size_t bytes = sizeof(float)) {
      return reinterpret_cast<uintptr_t>(p) == reinterpret_cast<uintptr_t>(base) + bytes * elements;
    };
    all = ts[0];
    all.numel = 0;
    const size_t grad_bytes = all.grad_type == device::ElemType::f32 ? sizeof(float) : 2;
    for (const OptimizerTensor& t : ts) {
      const int64_t at = all.numel;
      if (!follows(t.param, all.param, at) || t.grad_type != all.grad_type ||
          !follows(t.grad, all.grad, at, grad_bytes) || !follows(t.param_out, all.param_out, at))
        return false;
      for (int k = 0; k < ops_.states; ++k)
        if (!follows(t.state[k], all.state[k], at) || !follows(t.state_out[k], all.state_out[k], at)) return false;
      all.numel += t.numel;
    }
    return true;
  }

  static bool same_pointers(const std::vector<OptimizerTensor>& a, const std::vector<OptimizerTensor>& b) {
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].param != b[i].param || a[i].grad != b[i].grad || a[i].param_out != b[i].param_out ||
          a[i].numel != b[i].numel || a[i].state[0] != b[i].state[0] || a[i].state[1] != b[i].state[1] ||
          a[i].state_out[0] != b[i].state_out[0] || a[i].state_out[1] != b[i].state_out[1])
        return false;
    return true;
  }

  // After the step (which read the old scale and step count): AdamW's new step count, then the
  // new loss scale and good-step count.
  void after_step(const KernelArgs& a) {
    if (adamw_)
      device::launch_advance_step(flag_, a.in[ops_.step].as<const float>(), a.out[ops_.step_out].as<float>(),
                                  ctx_.stream());
    if (!ops_.scaling.on) return;
    device::launch_update_loss_scale(flag_, a.in[ops_.loss_scale].as<const float>(),
                                     a.in[ops_.loss_scale + 1].as<const float>(), a.out[ops_.loss_scale_out].as<float>(),
                                     a.out[ops_.loss_scale_out + 1].as<float>(), ops_.scaling.growth_interval,
                                     ctx_.stream());
  }

  CudaContext& ctx_;
  std::string node_name_;
  bool adamw_ = false;
  OperandLayout ops_;
  device::SgdHyper sgd_hyper_;
  device::AdamwHyper adamw_hyper_;
  int* flag_ = nullptr;  // device: 1 when a gradient overflowed this step
  OptimizerTensor* table_ = nullptr;  // device copy of host_table_
  std::vector<OptimizerTensor> host_table_;
  bool table_uploaded_ = false;
  std::vector<device::ElemType> grad_types_;  // per parameter: f32, or f16/bf16 (fold_gradient_cast)
};

}  // namespace

void register_optimizer_kernels() {
  add_kernel<OptimizerUpdate>({"sgd_update", "adamw_update"});
}

}  // namespace trident::cuda
