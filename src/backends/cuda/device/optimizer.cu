// Optimizer kernels of the cuda backend, PyTorch semantics: SGD (weight decay, momentum,
// Nesterov) and AdamW (torch.optim.AdamW), in f32 (gradients may arrive in f16/bf16) with the same rounding steps as the reference
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

// Gradient element i in f32 (widening f16/bf16 is exact, as the cast it replaces).
__device__ __forceinline__ float gradient(const OptimizerTensor& t, int64_t i) {
  return load_as_float(t.grad, t.grad_type, i);
}

// The elements' math on values: parameter p and its gradient g (unscaled) in, the states s
// updated in place, the new parameter returned.
struct SgdElement {
  float lr;
  SgdHyper h;
  static constexpr int kStates = 1;
  __device__ __forceinline__ float update(float p, float grad, float (&s)[kStates]) const {
    const float g = __fadd_rn(grad, __fmul_rn(h.weight_decay, p));
    const float m = __fadd_rn(__fmul_rn(h.momentum, s[0]), g);
    s[0] = m;
    const float step = h.nesterov ? __fadd_rn(g, __fmul_rn(h.momentum, m)) : m;
    return __fsub_rn(p, __fmul_rn(lr, step));
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
  __device__ __forceinline__ float update(float param, float g, float (&s)[kStates]) const {
    const float p = __fmul_rn(param, decay);
    const float m_in = s[0];
    const float m = __fadd_rn(m_in, __fmul_rn(one_minus_beta1, __fsub_rn(g, m_in)));
    const float v = __fadd_rn(__fmul_rn(s[1], beta2), __fmul_rn(__fmul_rn(one_minus_beta2, g), g));
    s[0] = m;
    s[1] = v;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), sqrt_bc2), eps);
    return __fsub_rn(p, __fmul_rn(step_size, __fdiv_rn(m, denom)));
  }
};

template <class Element>
__device__ __forceinline__ void step_element(const Element& e, const OptimizerTensor& t, int64_t i, float factor) {
  if (factor != factor) {
    keep_element(t, i, Element::kStates);
    return;
  }
  float s[Element::kStates];
  for (int k = 0; k < Element::kStates; ++k) s[k] = t.state[k][i];
  const float p = e.update(t.param[i], unscaled(gradient(t, i), factor), s);
  for (int k = 0; k < Element::kStates; ++k) t.state_out[k][i] = s[k];
  t.param_out[i] = p;
}

// Elements [i, i + 4) in 16-byte loads and stores (the gradient in 8 bytes when it is f16/bf16):
// the same math as step_element, element by element. The tensor must be packable and i a
// multiple of 4.
__device__ __forceinline__ bool packable(const OptimizerTensor& t, int states) {
  auto aligned = [](const void* p, unsigned bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  bool ok = aligned(t.param, 16) && aligned(t.param_out, 16) && aligned(t.grad, t.grad_type == ElemType::f32 ? 16 : 8);
  for (int k = 0; k < states; ++k) ok = ok && aligned(t.state[k], 16) && aligned(t.state_out[k], 16);
  return ok;
}

__device__ __forceinline__ void gradient_pack(const OptimizerTensor& t, int64_t i, float (&g)[4]) {
  if (t.grad_type == ElemType::f32) {
    const float4 v = *reinterpret_cast<const float4*>(static_cast<const float*>(t.grad) + i);
    g[0] = v.x, g[1] = v.y, g[2] = v.z, g[3] = v.w;
    return;
  }
  const uint2 v = *reinterpret_cast<const uint2*>(static_cast<const unsigned short*>(t.grad) + i);
  const unsigned short h[4] = {static_cast<unsigned short>(v.x & 0xffffu), static_cast<unsigned short>(v.x >> 16),
                               static_cast<unsigned short>(v.y & 0xffffu), static_cast<unsigned short>(v.y >> 16)};
  for (int j = 0; j < 4; ++j)
    g[j] = t.grad_type == ElemType::f16 ? __half2float(__ushort_as_half(h[j])) : __bfloat162float(__ushort_as_bfloat16(h[j]));
}

__device__ __forceinline__ float4 as_float4(const float (&v)[4]) { return make_float4(v[0], v[1], v[2], v[3]); }

template <class Element>
__device__ __forceinline__ void step_pack(const Element& e, const OptimizerTensor& t, int64_t i, float factor) {
  constexpr int K = Element::kStates;
  if (factor != factor) {
    for (int j = 0; j < 4; ++j) keep_element(t, i + j, K);
    return;
  }
  const float4 p = *reinterpret_cast<const float4*>(t.param + i);
  float4 s4[K];
  for (int k = 0; k < K; ++k) s4[k] = *reinterpret_cast<const float4*>(t.state[k] + i);
  float g[4];
  gradient_pack(t, i, g);
  const float pv[4] = {p.x, p.y, p.z, p.w};
  float out[4], s_out[K][4];
  for (int j = 0; j < 4; ++j) {
    float s[K];
    for (int k = 0; k < K; ++k) s[k] = j == 0 ? s4[k].x : j == 1 ? s4[k].y : j == 2 ? s4[k].z : s4[k].w;
    out[j] = e.update(pv[j], unscaled(g[j], factor), s);
    for (int k = 0; k < K; ++k) s_out[k][j] = s[k];
  }
  for (int k = 0; k < K; ++k) *reinterpret_cast<float4*>(t.state_out[k] + i) = as_float4(s_out[k]);
  *reinterpret_cast<float4*>(t.param_out + i) = as_float4(out);
}

// Elements [begin, end) of one tensor by the threads `lane`, `lane + lanes`, …: packs of 4 where
// the tensor allows (begin a multiple of 4), then the tail one by one.
template <class Element>
__device__ __forceinline__ void step_range(const Element& e, const OptimizerTensor& t, int64_t begin, int64_t end,
                                           int64_t lane, int64_t lanes, float factor) {
  int64_t i = begin;
  if (begin % 4 == 0 && packable(t, Element::kStates)) {
    const int64_t packs = (end - begin) / 4;
    for (int64_t k = lane; k < packs; k += lanes) step_pack(e, t, begin + 4 * k, factor);
    i = begin + 4 * packs;
  }
  for (int64_t k = i + lane; k < end; k += lanes) step_element(e, t, k, factor);
}

__global__ void sgd_flat_kernel(const float* __restrict__ lr, OptimizerTensor all, SgdHyper h) {
  step_range(SgdElement{*lr, h}, all, 0, all.numel, grid_start(), grid_stride(), gradient_factor(h.scaling));
}

__global__ void adamw_flat_kernel(const float* __restrict__ lr, OptimizerTensor all, AdamwHyper h) {
  step_range(AdamwElement(*lr, h), all, 0, all.numel, grid_start(), grid_stride(), gradient_factor(h.scaling));
}

// Whether a word of gradient bits holds an infinity or a NaN: an all-ones exponent in its one
// f32 value or in either of its two f16/bf16 values.
__device__ __forceinline__ bool nonfinite_word(uint32_t w, ElemType t) {
  switch (t) {
    case ElemType::f16: return (w & 0x7c00u) == 0x7c00u || (w & 0x7c000000u) == 0x7c000000u;
    case ElemType::bf16: return (w & 0x7f80u) == 0x7f80u || (w & 0x7f800000u) == 0x7f800000u;
    default: return (w & 0x7f800000u) == 0x7f800000u;
  }
}

// Whether gradient elements [begin, end) of t hold an infinity or a NaN, as seen by the threads
// lane, lane + lanes, …: in 16-byte vectors where the range starts aligned (2 bytes a thread
// would keep too few loads in flight to read at the memory's bandwidth), the rest one by one.
__device__ __forceinline__ bool nonfinite_range(const OptimizerTensor& t, int64_t begin, int64_t end, int64_t lane,
                                                int64_t lanes) {
  const int64_t width = t.grad_type == ElemType::f32 ? 4 : 8;  // elements a vector
  const auto* first = static_cast<const char*>(t.grad) + begin * (16 / width);
  bool bad = false;
  int64_t i = begin;
  if (reinterpret_cast<uintptr_t>(first) % 16 == 0) {
    const int64_t vectors = (end - begin) / width;
    const auto* v = reinterpret_cast<const uint4*>(first);
#pragma unroll 4
    for (int64_t k = lane; k < vectors; k += lanes) {
      const uint4 w = v[k];
      bad |= nonfinite_word(w.x, t.grad_type) | nonfinite_word(w.y, t.grad_type) | nonfinite_word(w.z, t.grad_type) |
             nonfinite_word(w.w, t.grad_type);
    }
    i = begin + vectors * width;
  }
  for (int64_t k = i + lane; k < end; k += lanes) bad |= !isfinite(gradient(t, k));
  return bad;
}

__global__ void nonfinite_flat_kernel(OptimizerTensor all, int* flag) {
  if (nonfinite_range(all, 0, all.numel, grid_start(), grid_stride())) *flag = 1;  // every writer writes the same value
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
    bad |= nonfinite_range(c.t, c.begin, c.end, threadIdx.x, blockDim.x);
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
    step_range(e, c.t, c.begin, c.end, threadIdx.x, blockDim.x, factor);
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
  nonfinite_flat_kernel<<<grid_for(all.numel), kThreads, 0, stream>>>(all, flag);
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
