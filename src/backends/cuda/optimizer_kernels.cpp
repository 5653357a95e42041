// The cuda backend's optimizer: sgd_update over n parameter tensors in one launch. When the
// tensors lie end to end in the flat parameter, gradient and momentum buffers (the usual
// layout), one flat loop covers them all; otherwise a device table of tensor pointers, made
// at construction and refreshed only when the bound pointers change, drives one launch.
#include <cstdint>
#include <memory>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/optimizer.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"

namespace trident::cuda {

namespace {

using device::SgdTensor;

class SgdUpdate final : public Kernel {
 public:
  SgdUpdate(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : ctx_(ctx), node_name_(node.name) {
    const int64_t count = node.attrs.i("count");
    if (count < 1) fail(node, "attribute 'count' must be at least 1");
    count_ = static_cast<size_t>(count);
    scaling_ = node.attrs.i("loss_scaling", 0) != 0;
    growth_interval_ = node.attrs.i("growth_interval", 2000);
    const size_t extra = scaling_ ? 2 : 0;
    expect_arity(node, 1 + 3 * count_ + extra, 1 + 3 * count_ + extra, 2 * count_ + extra, 2 * count_ + extra);
    for (size_t k = 0; k < extra; ++k)
      if (input_value(node, g, 1 + 3 * count_ + k).dtype != DType::f32)
        fail(node, "the loss scale and good-step count must be f32");
    const ir::Value& lr = input_value(node, g, 0);
    if (lr.dtype != DType::f32 || numel(lr.shape) != 1) fail(node, "the learning rate must be one f32 value");
    hyper_.momentum = static_cast<float>(node.attrs.f("momentum", 0.0));
    hyper_.weight_decay = static_cast<float>(node.attrs.f("weight_decay", 0.0));
    hyper_.nesterov = node.attrs.i("nesterov", 0) != 0;
    for (size_t t = 0; t < count_; ++t) {
      const ir::Value& p = input_value(node, g, 1 + t);
      for (const ir::Value* v : {&p, &input_value(node, g, 1 + count_ + t), &input_value(node, g, 1 + 2 * count_ + t),
                                 &output_value(node, g, t), &output_value(node, g, count_ + t)}) {
        if (v->dtype != DType::f32)
          fail(node, "'" + v->name + "' is " + std::string(dtype_name(v->dtype)) +
                         "; the cuda SGD keeps parameters, gradients and momentum in f32");
        expect_shape(node, *v, p.shape, "parameter, gradient or momentum tensor");
      }
    }
    host_table_.resize(count_);
    table_ = static_cast<SgdTensor*>(ctx.allocate(sizeof(SgdTensor) * count_));
    if (scaling_) flag_ = static_cast<int*>(ctx.allocate(sizeof(int)));
  }

  ~SgdUpdate() override {
    ctx_.free(table_);
    if (flag_) ctx_.free(flag_);
  }
  SgdUpdate(const SgdUpdate&) = delete;
  SgdUpdate& operator=(const SgdUpdate&) = delete;

  void run(const KernelArgs& a) override {
    const float* lr = a.in[0].as<const float>();
    std::vector<SgdTensor> now(count_);
    int64_t chunks = 0;
    for (size_t t = 0; t < count_; ++t) {
      const int64_t n = a.in[1 + t].numel();
      now[t] = {a.in[1 + t].as<const float>(), a.in[1 + count_ + t].as<const float>(),
                a.in[1 + 2 * count_ + t].as<const float>(), a.out[t].as<float>(), a.out[count_ + t].as<float>(), n,
                chunks};
      chunks += (n + device::kSgdChunk - 1) / device::kSgdChunk;
    }
    device::SgdHyper h = hyper_;
    if (scaling_) {
      h.loss_scale = a.in[1 + 3 * count_].as<const float>();
      h.found_nonfinite = flag_;
    }
    if (SgdTensor all; end_to_end(now, all)) {
      if (scaling_) device::launch_find_nonfinite_flat(all, flag_, ctx_.stream());
      device::launch_sgd_flat(lr, all, h, ctx_.stream());
      update_scale(a);
      return;
    }
    if (!table_uploaded_ || !same_pointers(now, host_table_)) {
      host_table_ = std::move(now);
      // Pageable source: the copy has taken the bytes when the call returns.
      check(cudaMemcpyAsync(table_, host_table_.data(), sizeof(SgdTensor) * count_, cudaMemcpyHostToDevice,
                            ctx_.stream()),
            "uploading the tensor table of sgd_update node '" + node_name_ + "'");
      table_uploaded_ = true;
    }
    if (scaling_) device::launch_find_nonfinite_table(table_, static_cast<int>(count_), chunks, flag_, ctx_.stream());
    device::launch_sgd_table(lr, table_, static_cast<int>(count_), chunks, h, ctx_.stream());
    update_scale(a);
  }

 private:
  // Whether the tensors follow each other without gaps in all five buffers; if so, `all`
  // describes the whole run.
  static bool end_to_end(const std::vector<SgdTensor>& ts, SgdTensor& all) {
    // Compared as addresses: the pointers name device memory, never dereferenced here.
    auto follows = [](const void* p, const void* base, int64_t elements) {
      return reinterpret_cast<uintptr_t>(p) == reinterpret_cast<uintptr_t>(base) + sizeof(float) * elements;
    };
    all = ts[0];
    all.numel = 0;
    for (const SgdTensor& t : ts) {
      const int64_t at = all.numel;
      if (!follows(t.param, all.param, at) || !follows(t.grad, all.grad, at) || !follows(t.momentum, all.momentum, at) ||
          !follows(t.param_out, all.param_out, at) || !follows(t.momentum_out, all.momentum_out, at))
        return false;
      all.numel += t.numel;
    }
    return true;
  }

  static bool same_pointers(const std::vector<SgdTensor>& a, const std::vector<SgdTensor>& b) {
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].param != b[i].param || a[i].grad != b[i].grad || a[i].momentum != b[i].momentum ||
          a[i].param_out != b[i].param_out || a[i].momentum_out != b[i].momentum_out || a[i].numel != b[i].numel)
        return false;
    return true;
  }

  // After the step (which read the old scale): the new loss scale and good-step count.
  void update_scale(const KernelArgs& a) {
    if (!scaling_) return;
    device::launch_update_loss_scale(flag_, a.in[1 + 3 * count_].as<const float>(), a.in[2 + 3 * count_].as<const float>(),
                                     a.out[2 * count_].as<float>(), a.out[2 * count_ + 1].as<float>(), growth_interval_,
                                     ctx_.stream());
  }

  CudaContext& ctx_;
  std::string node_name_;
  size_t count_ = 0;
  bool scaling_ = false;
  int64_t growth_interval_ = 2000;
  int* flag_ = nullptr;  // device: 1 when a gradient overflowed this step
  device::SgdHyper hyper_;
  SgdTensor* table_ = nullptr;  // device copy of host_table_
  std::vector<SgdTensor> host_table_;
  bool table_uploaded_ = false;
};

}  // namespace

void register_optimizer_kernels() { add_kernel<SgdUpdate>("sgd_update"); }

}  // namespace trident::cuda
