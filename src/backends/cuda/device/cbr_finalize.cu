// cbr's batch-norm finalize: from the per-channel Σ and Σ² of the convolution output to the
// saved statistics, the running statistics (PyTorch momentum, unbiased variance) and the f32
// scale/shift that the apply step uses. One thread per channel, f64 arithmetic: it is tiny.
#include <cuda_fp16.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/conv_device.h"

namespace trident::cuda::device {

namespace {

__device__ double load(const TypedChannels& t, int64_t c) { return load_as_float(t.data, t.type, c); }
__device__ void store(const TypedChannels& t, int64_t c, double v) {
  store_from_float(t.data, t.type, c, static_cast<float>(v));
}

__global__ void bn_finalize_kernel(BnFinalizeArgs a) {
  const double m = static_cast<double>(a.count);
  const double unbias = m / (m - 1.0);
  for (int64_t c = grid_start(); c < a.channels; c += grid_stride()) {
    const double mean = static_cast<double>(a.sum[c]) / m;
    double var = static_cast<double>(a.sq_sum[c]) / m - mean * mean;
    var = var > 0.0 ? var : 0.0;
    const double invstd = 1.0 / sqrt(var + a.eps);
    const double scale = load(a.gamma, c) * invstd;
    float scale_f = static_cast<float>(scale);
    // In the reference backend's order, so the shift rounds to the same f32 value.
    float shift_f = static_cast<float>(load(a.beta, c) - mean * invstd * load(a.gamma, c));
    if (a.affine_in_f16) {
      scale_f = __half2float(__float2half_rn(scale_f));
      shift_f = __half2float(__float2half_rn(shift_f));
    }
    a.scale[c] = scale_f;
    a.shift[c] = shift_f;
    const double running_mean = load(a.running_mean_in, c), running_var = load(a.running_var_in, c);
    store(a.saved_mean, c, mean);
    store(a.saved_invstd, c, invstd);
    float running_mean_f = static_cast<float>((1.0 - a.momentum) * running_mean + a.momentum * mean);
    if (a.cancelled_bias.data)
      running_mean_f = __fadd_rn(running_mean_f, __fmul_rn(static_cast<float>(a.momentum),
                                                           load_as_float(a.cancelled_bias.data, a.cancelled_bias.type, c)));
    store(a.running_mean_out, c, running_mean_f);
    store(a.running_var_out, c, (1.0 - a.momentum) * running_var + a.momentum * var * unbias);
  }
}

}  // namespace

void launch_bn_finalize(const BnFinalizeArgs& a, cudaStream_t stream) {
  if (a.channels <= 0) return;
  bn_finalize_kernel<<<grid_for(a.channels), kThreads, 0, stream>>>(a);
  check_launch("bn_finalize_kernel");
}

}  // namespace trident::cuda::device
