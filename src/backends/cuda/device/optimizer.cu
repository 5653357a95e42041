// Optimizer kernels of the cuda backend, PyTorch semantics: SGD (weight decay, momentum,
// Nesterov) and AdamW (torch.optim.AdamW), in f32 with the same rounding steps as the reference
// backend (no fused multiply-adds), so a step matches cpu_ref closely (SGD bit for bit). Each
// element is read before it is written by the same thread, so the in-place update is safe; no
// atomics, so every run gives the same bits.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/optimizer.h"

namespace trident::cuda::device {

namespace {

// The multiplier of the gradients: 1, or 1 / loss scale; NaN marks a step to skip.
__device__ __forceinline__ float gradient_factor(const LossScaleView& s) {
  if (!s.loss_scale) return 1.f;
  if (s.found_nonfinite && *s.found_nonfinite) return __int_as_float(0x7fc00000);
  return 1.f / *s.loss_scale;
}

// A skipped step: outputs keep their inputs' values.
__device__ __forceinline__ void keep_element(const OptimizerTensor& t, int64_t i, int states) {
  if (t.param_out != t.param) t.param_out[i] = t.param[i];
  for (int k = 0; k < states; ++k)
    if (t.state_out[k] != t.state[k]) t.state_out[k][i] = t.state[k][i];
}

__device__ __forceinline__ float unscaled(float grad, float factor) {
  return factor == 1.f ? grad : __fmul_rn(grad, factor);
}

struct SgdElement {
  float lr;
  SgdHyper h;
  static constexpr int kStates = 1;
  __device__ __forceinline__ void operator()(const OptimizerTensor& t, int64_t i, float factor) const {
    const float p = t.param[i];
    const float g = __fadd_rn(unscaled(t.grad[i], factor), __fmul_rn(h.weight_decay, p));
    const float m = __fadd_rn(__fmul_rn(h.momentum, t.state[0][i]), g);
    t.state_out[0][i] = m;
    const float step = h.nesterov ? __fadd_rn(g, __fmul_rn(h.momentum, m)) : m;
    t.param_out[i] = __fsub_rn(p, __fmul_rn(lr, step));
  }
};

// One AdamW step's f32 scalars, derived in double from lr and the step number as cpu_ref does.
struct AdamwElement {
  float decay, beta2, one_minus_beta1, one_minus_beta2, step_size, sqrt_bc2, eps;
  static constexpr int kStates = 2;
  __device__ __forceinline__ AdamwElement(float lr, const AdamwHyper& h) {
    const double rate = lr, t = static_cast<double>(*h.step) + 1.0;
    decay = static_cast<float>(1.0 - rate * h.weight_decay);
    beta2 = static_cast<float>(h.beta2);
    one_minus_beta1 = static_cast<float>(1.0 - h.beta1);
    one_minus_beta2 = static_cast<float>(1.0 - h.beta2);
    step_size = static_cast<float>(rate / (1.0 - pow(h.beta1, t)));
    sqrt_bc2 = static_cast<float>(sqrt(1.0 - pow(h.beta2, t)));
    eps = static_cast<float>(h.eps);
  }
  __device__ __forceinline__ void operator()(const OptimizerTensor& t, int64_t i, float factor) const {
    const float g = unscaled(t.grad[i], factor);
    const float p = __fmul_rn(t.param[i], decay);
    const float m_in = t.state[0][i];
    const float m = __fadd_rn(m_in, __fmul_rn(one_minus_beta1, __fsub_rn(g, m_in)));
    const float v = __fadd_rn(__fmul_rn(t.state[1][i], beta2), __fmul_rn(__fmul_rn(one_minus_beta2, g), g));
    t.state_out[0][i] = m;
    t.state_out[1][i] = v;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), sqrt_bc2), eps);
    t.param_out[i] = __fsub_rn(p, __fmul_rn(step_size, __fdiv_rn(m, denom)));
  }
};

template <class Element>
__device__ __forceinline__ void step_element(const Element& e, const OptimizerTensor& t, int64_t i, float factor) {
  if (factor != factor) keep_element(t, i, Element::kStates);
  else e(t, i, factor);
}

__global__ void sgd_flat_kernel(const float* __restrict__ lr, OptimizerTensor all, SgdHyper h) {
  const SgdElement e{*lr, h};
  const float factor = gradient_factor(h.scaling);
  for (int64_t i = grid_start(); i < all.numel; i += grid_stride()) step_element(e, all, i, factor);
}

__global__ void adamw_flat_kernel(const float* __restrict__ lr, OptimizerTensor all, AdamwHyper h) {
  const AdamwElement e(*lr, h);
  const float factor = gradient_factor(h.scaling);
  for (int64_t i = grid_start(); i < all.numel; i += grid_stride()) step_element(e, all, i, factor);
}

__global__ void nonfinite_flat_kernel(const float* __restrict__ grad, int64_t n, int* flag) {
  bool bad = false;
  for (int64_t i = grid_start(); i < n; i += grid_stride()) bad |= !isfinite(grad[i]);
  if (bad) *flag = 1;  // every writer writes the same value
}

// The elements of chunk `chunk` of a table's tensors: its tensor (the last whose first chunk
// is ≤ chunk, by binary search) and the range [begin, end) of that tensor's elements.
struct TableChunk {
  OptimizerTensor t;
  int64_t begin, end;
};
__device__ __forceinline__ TableChunk table_chunk(const OptimizerTensor* __restrict__ table, int count,
                                                  int64_t chunk) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table[mid].first_chunk <= chunk) lo = mid;
    else hi = mid - 1;
  }
  const OptimizerTensor t = table[lo];
  const int64_t begin = (chunk - t.first_chunk) * kOptimizerChunk;
  return {t, begin, begin + kOptimizerChunk < t.numel ? begin + kOptimizerChunk : t.numel};
}

__global__ void nonfinite_table_kernel(const OptimizerTensor* __restrict__ table, int count, int64_t total_chunks,
                                       int* flag) {
  bool bad = false;
  for (int64_t chunk = blockIdx.x; chunk < total_chunks; chunk += gridDim.x) {
    const TableChunk c = table_chunk(table, count, chunk);
    for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) bad |= !isfinite(c.t.grad[i]);
  }
  if (bad) *flag = 1;
}

__global__ void update_loss_scale_kernel(const int* flag, const float* scale_in, const float* good_in,
                                         float* scale_out, float* good_out, int64_t growth_interval) {
  const float scale = *scale_in, good = *good_in;
  if (*flag) {
    *scale_out = fmaxf(1.f, scale * 0.5f);
    *good_out = 0.f;
  } else if (good + 1.f >= static_cast<float>(growth_interval)) {
    *scale_out = scale * 2.f;
    *good_out = 0.f;
  } else {
    *scale_out = scale;
    *good_out = good + 1.f;
  }
}

__global__ void advance_step_kernel(const int* flag, const float* step_in, float* step_out) {
  const float step = *step_in;
  *step_out = flag && *flag ? step : step + 1.f;
}

template <class Element>
__device__ __forceinline__ void table_steps(const Element& e, const OptimizerTensor* __restrict__ table, int count,
                                            int64_t total_chunks, float factor) {
  for (int64_t chunk = blockIdx.x; chunk < total_chunks; chunk += gridDim.x) {
    const TableChunk c = table_chunk(table, count, chunk);
    for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) step_element(e, c.t, i, factor);
  }
}

__global__ void sgd_table_kernel(const float* __restrict__ lr, const OptimizerTensor* __restrict__ table, int count,
                                 int64_t total_chunks, SgdHyper h) {
  table_steps(SgdElement{*lr, h}, table, count, total_chunks, gradient_factor(h.scaling));
}

__global__ void adamw_table_kernel(const float* __restrict__ lr, const OptimizerTensor* __restrict__ table, int count,
                                   int64_t total_chunks, AdamwHyper h) {
  table_steps(AdamwElement(*lr, h), table, count, total_chunks, gradient_factor(h.scaling));
}

unsigned table_blocks(int64_t total_chunks) {
  return static_cast<unsigned>(total_chunks < kMaxBlocks ? total_chunks : kMaxBlocks);
}

}  // namespace

void launch_find_nonfinite_flat(const OptimizerTensor& all, int* flag, cudaStream_t stream) {
  check(cudaMemsetAsync(flag, 0, sizeof(int), stream), "clearing the overflow flag");
  if (all.numel <= 0) return;
  nonfinite_flat_kernel<<<grid_for(all.numel), kThreads, 0, stream>>>(all.grad, all.numel, flag);
  check_launch("nonfinite_flat_kernel");
}

void launch_find_nonfinite_table(const OptimizerTensor* table, int count, int64_t total_chunks, int* flag,
                                 cudaStream_t stream) {
  check(cudaMemsetAsync(flag, 0, sizeof(int), stream), "clearing the overflow flag");
  if (count <= 0 || total_chunks <= 0) return;
  nonfinite_table_kernel<<<table_blocks(total_chunks), kThreads, 0, stream>>>(table, count, total_chunks, flag);
  check_launch("nonfinite_table_kernel");
}

void launch_update_loss_scale(const int* flag, const float* scale_in, const float* good_in, float* scale_out,
                              float* good_out, int64_t growth_interval, cudaStream_t stream) {
  update_loss_scale_kernel<<<1, 1, 0, stream>>>(flag, scale_in, good_in, scale_out, good_out, growth_interval);
  check_launch("update_loss_scale_kernel");
}

void launch_sgd_flat(const float* lr, const OptimizerTensor& all, const SgdHyper& h, cudaStream_t stream) {
  if (all.numel <= 0) return;
  sgd_flat_kernel<<<grid_for(all.numel), kThreads, 0, stream>>>(lr, all, h);
  check_launch("sgd_flat_kernel");
}

void launch_sgd_table(const float* lr, const OptimizerTensor* table, int count, int64_t total_chunks,
                      const SgdHyper& h, cudaStream_t stream) {
  if (count <= 0 || total_chunks <= 0) return;
  sgd_table_kernel<<<table_blocks(total_chunks), kThreads, 0, stream>>>(lr, table, count, total_chunks, h);
  check_launch("sgd_table_kernel");
}

void launch_adamw_flat(const float* lr, const OptimizerTensor& all, const AdamwHyper& h, cudaStream_t stream) {
  if (all.numel <= 0) return;
  adamw_flat_kernel<<<grid_for(all.numel), kThreads, 0, stream>>>(lr, all, h);
  check_launch("adamw_flat_kernel");
}

void launch_adamw_table(const float* lr, const OptimizerTensor* table, int count, int64_t total_chunks,
                        const AdamwHyper& h, cudaStream_t stream) {
  if (count <= 0 || total_chunks <= 0) return;
  adamw_table_kernel<<<table_blocks(total_chunks), kThreads, 0, stream>>>(lr, table, count, total_chunks, h);
  check_launch("adamw_table_kernel");
}

void launch_advance_step(const int* flag, const float* step_in, float* step_out, cudaStream_t stream) {
  advance_step_kernel<<<1, 1, 0, stream>>>(flag, step_in, step_out);
  check_launch("advance_step_kernel");
}

}  // namespace trident::cuda::device
