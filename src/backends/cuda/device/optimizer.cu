// SGD kernels of the cuda backend (PyTorch semantics: weight decay, momentum, Nesterov), in
// f32 with the same rounding steps as the reference backend (no fused multiply-adds), so a
// step matches cpu_ref bit for bit. Each element is read before it is written by the same
// thread, so the in-place update is safe.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/optimizer.h"

namespace trident::cuda::device {

namespace {

// The multiplier of the gradients: 1, or 1 / loss scale; NaN marks a step to skip.
__device__ __forceinline__ float gradient_factor(const SgdHyper& h) {
  if (!h.loss_scale) return 1.f;
  if (h.found_nonfinite && *h.found_nonfinite) return __int_as_float(0x7fc00000);
  return 1.f / *h.loss_scale;
}

__device__ __forceinline__ void sgd_element(const SgdTensor& t, int64_t i, float lr, const SgdHyper& h,
                                            float factor) {
  if (factor != factor) {  // skipped step: outputs keep their inputs' values
    if (t.param_out != t.param) t.param_out[i] = t.param[i];
    if (t.momentum_out != t.momentum) t.momentum_out[i] = t.momentum[i];
    return;
  }
  const float p = t.param[i];
  const float grad = factor == 1.f ? t.grad[i] : __fmul_rn(t.grad[i], factor);
  const float g = __fadd_rn(grad, __fmul_rn(h.weight_decay, p));
  const float m = __fadd_rn(__fmul_rn(h.momentum, t.momentum[i]), g);
  t.momentum_out[i] = m;
  const float step = h.nesterov ? __fadd_rn(g, __fmul_rn(h.momentum, m)) : m;
  t.param_out[i] = __fsub_rn(p, __fmul_rn(lr, step));
}

__global__ void sgd_flat_kernel(const float* __restrict__ lr, SgdTensor all, SgdHyper h) {
  const float rate = *lr, factor = gradient_factor(h);
  for (int64_t i = grid_start(); i < all.numel; i += grid_stride()) sgd_element(all, i, rate, h, factor);
}

__global__ void nonfinite_flat_kernel(const float* __restrict__ grad, int64_t n, int* flag) {
  bool bad = false;
  for (int64_t i = grid_start(); i < n; i += grid_stride()) bad |= !isfinite(grad[i]);
  if (bad) *flag = 1;  // every writer writes the same value
}

// The elements of chunk `chunk` of a table's tensors: its tensor (the last whose first chunk
// is ≤ chunk, by binary search) and the range [begin, end) of that tensor's elements.
struct TableChunk {
  SgdTensor t;
  int64_t begin, end;
};
__device__ __forceinline__ TableChunk table_chunk(const SgdTensor* __restrict__ table, int count, int64_t chunk) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table[mid].first_chunk <= chunk) lo = mid;
    else hi = mid - 1;
  }
  const SgdTensor t = table[lo];
  const int64_t begin = (chunk - t.first_chunk) * kSgdChunk;
  return {t, begin, begin + kSgdChunk < t.numel ? begin + kSgdChunk : t.numel};
}

__global__ void nonfinite_table_kernel(const SgdTensor* __restrict__ table, int count, int64_t total_chunks,
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

__global__ void sgd_table_kernel(const float* __restrict__ lr, const SgdTensor* __restrict__ table, int count,
                                 int64_t total_chunks, SgdHyper h) {
  const float rate = *lr, factor = gradient_factor(h);
  for (int64_t chunk = blockIdx.x; chunk < total_chunks; chunk += gridDim.x) {
    const TableChunk c = table_chunk(table, count, chunk);
    for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) sgd_element(c.t, i, rate, h, factor);
  }
}

}  // namespace

void launch_find_nonfinite_flat(const SgdTensor& all, int* flag, cudaStream_t stream) {
  check(cudaMemsetAsync(flag, 0, sizeof(int), stream), "clearing the overflow flag");
  if (all.numel <= 0) return;
  nonfinite_flat_kernel<<<grid_for(all.numel), kThreads, 0, stream>>>(all.grad, all.numel, flag);
  check_launch("nonfinite_flat_kernel");
}

void launch_find_nonfinite_table(const SgdTensor* table, int count, int64_t total_chunks, int* flag,
                                 cudaStream_t stream) {
  check(cudaMemsetAsync(flag, 0, sizeof(int), stream), "clearing the overflow flag");
  if (count <= 0 || total_chunks <= 0) return;
  const unsigned blocks = static_cast<unsigned>(total_chunks < kMaxBlocks ? total_chunks : kMaxBlocks);
  nonfinite_table_kernel<<<blocks, kThreads, 0, stream>>>(table, count, total_chunks, flag);
  check_launch("nonfinite_table_kernel");
}

void launch_update_loss_scale(const int* flag, const float* scale_in, const float* good_in, float* scale_out,
                              float* good_out, int64_t growth_interval, cudaStream_t stream) {
  update_loss_scale_kernel<<<1, 1, 0, stream>>>(flag, scale_in, good_in, scale_out, good_out, growth_interval);
  check_launch("update_loss_scale_kernel");
}

void launch_sgd_flat(const float* lr, const SgdTensor& all, const SgdHyper& h, cudaStream_t stream) {
  if (all.numel <= 0) return;
  sgd_flat_kernel<<<grid_for(all.numel), kThreads, 0, stream>>>(lr, all, h);
  check_launch("sgd_flat_kernel");
}

void launch_sgd_table(const float* lr, const SgdTensor* table, int count, int64_t total_chunks, const SgdHyper& h,
                      cudaStream_t stream) {
  if (count <= 0 || total_chunks <= 0) return;
  const unsigned blocks = static_cast<unsigned>(total_chunks < kMaxBlocks ? total_chunks : kMaxBlocks);
  sgd_table_kernel<<<blocks, kThreads, 0, stream>>>(lr, table, count, total_chunks, h);
  check_launch("sgd_table_kernel");
}

}  // namespace trident::cuda::device
