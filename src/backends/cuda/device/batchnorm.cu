// Batchnorm kernels of the cuda backend over [M, C] activations (NHWC, M = N·H·W).
// Phase 1 (partial sums): a (channel columns × rows) block per (channel tile, row chunk);
// each thread keeps f64 sums for its channels over its rows, and the block adds its rows'
// sums in a fixed tree order into the workspace. Phase 2 (finalize): a block of 32 channels ×
// 32 lanes, each lane adding every 32nd chunk in order and the lanes then added in a fixed
// tree, writes statistics, gradients and the f32 coefficients of phase 3 (apply), which
// rewrites every element with per-channel constants held in registers.
//
// Two layouts of the same math. Vector path (C a multiple of the 16-byte width, every
// activation pointer 16-byte aligned): a thread owns 16 consecutive bytes of one row, i.e.
// 4 f32 or 8 f16/bf16 channels, loads and stores them as one uint4 and converts them to f32
// in registers; its rows are m = blockIdx.y·tile_y + threadIdx.y + k·gridDim.y·tile_y, and
// the grid holds as many blocks as the GPU keeps resident, so one wave streams the tensor.
// Scalar path (anything else): one channel per thread, a contiguous chunk of rows per block.
// No floating-point atomics anywhere: every result is the same bits on every run.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/batchnorm.h"
#include "backends/cuda/device/common.cuh"

namespace trident::cuda::device {

namespace {

constexpr int64_t kMaxGridY = 65535;
constexpr int kCoefficients = 4;  // f32 values per channel after the partial sums
constexpr int kVectorBytes = 16;
constexpr unsigned kFinalizeChannels = 32, kFinalizeLanes = 32;  // finalize block shape

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The workspace holds the coefficients (kCoefficients × C f32), then the partial sums
// ([2][chunks][C] f64) of whichever path the launch takes.
size_t coefficient_bytes(int64_t C) { return align_up(sizeof(float) * kCoefficients * static_cast<size_t>(C)); }
float* coefficients(void* workspace) { return static_cast<float*>(workspace); }
double* partial_sums(void* workspace, const ChannelReductionPlan& plan) {
  return reinterpret_cast<double*>(static_cast<char*>(workspace) + coefficient_bytes(plan.C));
}

__device__ __forceinline__ float load(const ChannelTensor& t, int64_t c) { return load_as_float(t.data, t.type, c); }
__device__ __forceinline__ void store(const ChannelTensor& t, int64_t c, double v) {
  store_from_float(t.data, t.type, c, static_cast<float>(v));
}

// ---- 16-byte vectors of consecutive channels -------------------------------------------

template <class T>
constexpr int kWidth = kVectorBytes / static_cast<int>(sizeof(T));

__device__ __forceinline__ uint4 load_vector(const void* p) { return *static_cast<const uint4*>(p); }
__device__ __forceinline__ void store_vector(void* p, uint4 v) { *static_cast<uint4*>(p) = v; }

// Element j of a vector is the j-th channel; 16-bit elements sit low half first in each word
// (little-endian), as in memory. The conversions are the ones to_float / from_float make.
__device__ __forceinline__ unsigned word(const uint4& v, int w) { return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w; }

__device__ __forceinline__ void unpack(const uint4& v, float (&f)[4]) {
  f[0] = __uint_as_float(v.x);
  f[1] = __uint_as_float(v.y);
  f[2] = __uint_as_float(v.z);
  f[3] = __uint_as_float(v.w);
}
template <class T>
__device__ __forceinline__ void unpack(const uint4& v, float (&f)[8]) {
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const unsigned short lo = static_cast<unsigned short>(word(v, w) & 0xffffu);
    const unsigned short hi = static_cast<unsigned short>(word(v, w) >> 16);
    if constexpr (std::is_same_v<T, __half>) {
      f[2 * w] = __half2float(__ushort_as_half(lo));
      f[2 * w + 1] = __half2float(__ushort_as_half(hi));
    } else {
      f[2 * w] = __bfloat162float(__ushort_as_bfloat16(lo));
      f[2 * w + 1] = __bfloat162float(__ushort_as_bfloat16(hi));
    }
  }
}
template <class T>
__device__ __forceinline__ void to_floats(const uint4& v, float (&f)[kWidth<T>]) {
  if constexpr (std::is_same_v<T, float>) unpack(v, f);
  else unpack<T>(v, f);
}

__device__ __forceinline__ unsigned short bits16(__half h) { return __half_as_ushort(h); }
__device__ __forceinline__ unsigned short bits16(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }

template <class T>
__device__ __forceinline__ uint4 from_floats(const float (&f)[kWidth<T>]) {
  uint4 v;
  if constexpr (std::is_same_v<T, float>) {
    v.x = __float_as_uint(f[0]);
    v.y = __float_as_uint(f[1]);
    v.z = __float_as_uint(f[2]);
    v.w = __float_as_uint(f[3]);
  } else {
    unsigned w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = static_cast<unsigned>(bits16(from_float<T>(f[2 * i]))) |
             (static_cast<unsigned>(bits16(from_float<T>(f[2 * i + 1]))) << 16);
    v = make_uint4(w[0], w[1], w[2], w[3]);
  }
  return v;
}

// The incoming gradient of the fused backward when it arrives as two terms (dy + dy_other):
// added and rounded to T exactly as a separate add kernel would store it, then widened.
template <class T>
__device__ __forceinline__ float gradient_sum(float a, float b) {
  return to_float(from_float<T>(__fadd_rn(a, b)));
}
template <class T>
__device__ __forceinline__ void add_gradient(const uint4& other, float (&dz)[kWidth<T>]) {
  float o[kWidth<T>];
  to_floats<T>(other, o);
#pragma unroll
  for (int j = 0; j < kWidth<T>; ++j) dz[j] = gradient_sum<T>(dz[j], o[j]);
}

// Where the fused backward reads its ReLU mask: the relu output (y > 0), the packed bits
// (core/relu_mask.h: bit c % 8 of byte c / 8 of a row of row_bytes bytes), or the layer's
// affine (scale[C], shift[C]), from which y = relu(x·scale + shift), rounded to T, is
// recomputed from the batchnorm input x as the next convolution's prologue computed it
// (defer_bn_apply). None of them: no mask.
template <class T>
struct MaskSource {
  const T* y = nullptr;
  const unsigned char* bits = nullptr;
  int64_t row_bytes = 0;
  const float* affine = nullptr;
  int64_t channels = 0;
  __host__ __device__ bool any() const { return y || bits || affine; }
  __device__ __forceinline__ bool recomputed_on(float x, int64_t c) const {
    const float v = __fadd_rn(__fmul_rn(x, affine[c]), affine[channels + c]);
    return to_float(from_float<T>(v)) > 0.f;
  }
  __device__ __forceinline__ bool on(int64_t m, int64_t c, int64_t i, float x) const {
    if (bits) return (bits[m * row_bytes + c / 8] >> (c % 8)) & 1u;
    if (affine) return recomputed_on(x, c);
    return to_float(y[i]) > 0.f;
  }
  // The bits of channels c0, c0 + 1, … of row m from bit 0 on (c0 % 8 plus the vector's
  // width stays within one byte: widths are 4 or 8 and c0 a multiple of the width).
  __device__ __forceinline__ unsigned byte_from(int64_t m, int64_t c0) const {
    return static_cast<unsigned>(bits[m * row_bytes + c0 / 8]) >> (c0 % 8);
  }
};

// The affine of a vector's channels c0, c0 + 1, …, loaded once per thread (vector paths).
template <class T>
struct VectorAffine {
  float scale[kWidth<T>], shift[kWidth<T>];
  __device__ __forceinline__ void load(const MaskSource<T>& mask, int64_t c0) {
    if (!mask.affine) return;
#pragma unroll
    for (int j = 0; j < kWidth<T>; ++j) {
      scale[j] = mask.affine[c0 + j];
      shift[j] = mask.affine[mask.channels + c0 + j];
    }
  }
};

// Zeroes the elements of dz whose mask is off: from a loaded y vector, a loaded mask byte,
// or the loaded x vector through the affine of its channels.
template <class T>
__device__ __forceinline__ void mask_gradient(const MaskSource<T>& mask, const uint4& y, unsigned byte,
                                              const float (&x)[kWidth<T>], const VectorAffine<T>& affine,
                                              float (&dz)[kWidth<T>]) {
  if (mask.bits) {
#pragma unroll
    for (int j = 0; j < kWidth<T>; ++j)
      if (!((byte >> j) & 1u)) dz[j] = 0.f;
    return;
  }
  if (mask.affine) {
#pragma unroll
    for (int j = 0; j < kWidth<T>; ++j) {
      const float v = __fadd_rn(__fmul_rn(x[j], affine.scale[j]), affine.shift[j]);
      if (!(to_float(from_float<T>(v)) > 0.f)) dz[j] = 0.f;
    }
    return;
  }
  float yf[kWidth<T>];
  to_floats<T>(y, yf);
#pragma unroll
  for (int j = 0; j < kWidth<T>; ++j)
    if (!(yf[j] > 0.f)) dz[j] = 0.f;
}

// ---- phase 1: partial sums ---------------------------------------------------------------

// Adds the block's per-thread sums (N channels from c0 on) over threadIdx.y in a fixed tree
// order (blockDim.y a power of two, blockDim.x·blockDim.y == kThreads) and writes the
// chunk's two partial sums of those channels; the chunk is blockIdx.y of gridDim.y.
template <int N>
__device__ void write_block_partials(const double (&s1)[N], const double (&s2)[N], int64_t c0, int64_t C,
                                     double* partial) {
  __shared__ double shared[2 * N][kThreads];
  const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    shared[j][t] = s1[j];
    shared[N + j][t] = s2[j];
  }
  __syncthreads();
  for (unsigned half = blockDim.y / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) {
#pragma unroll
      for (int j = 0; j < 2 * N; ++j) shared[j][t] += shared[j][t + half * blockDim.x];
    }
    __syncthreads();
  }
  if (threadIdx.y == 0 && c0 < C) {
    const int64_t chunks = gridDim.y;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      partial[static_cast<int64_t>(blockIdx.y) * C + c0 + j] = shared[j][t];
      partial[(chunks + blockIdx.y) * C + c0 + j] = shared[N + j][t];
    }
  }
}

// Scalar path: this thread's channel and the row range of its block's chunk.
struct ChunkRows {
  int64_t c, begin, end;
};
__device__ __forceinline__ ChunkRows chunk_rows(int64_t M, int64_t rows_per_chunk) {
  ChunkRows r;
  r.c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  r.begin = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  r.end = r.begin + rows_per_chunk < M ? r.begin + rows_per_chunk : M;
  return r;
}

// Σx and Σx² per channel and chunk (scalar path).
template <class T>
__global__ void moments_partial_kernel(int64_t M, int64_t C, int64_t rows_per_chunk, const T* __restrict__ x,
                                       double* __restrict__ partial) {
  const ChunkRows r = chunk_rows(M, rows_per_chunk);
  double s1[1] = {0.0}, s2[1] = {0.0};
  if (r.c < C) {
#pragma unroll 4
    for (int64_t m = r.begin + threadIdx.y; m < r.end; m += blockDim.y) {
      const double v = to_float(x[m * C + r.c]);
      s1[0] += v;
      s2[0] += v * v;
    }
  }
  write_block_partials<1>(s1, s2, r.c, C, partial);
}

// Σdz and Σdz·(x − mean) per channel and chunk, dz = dy [+ dy_other] (masked when a mask
// is given) (scalar path).
template <class T>
__global__ void gradient_partial_kernel(int64_t M, int64_t C, int64_t rows_per_chunk, const T* __restrict__ x,
                                        const T* __restrict__ dy, const T* __restrict__ dy_other,
                                        MaskSource<T> mask, ChannelTensor saved_mean,
                                        double* __restrict__ partial) {
  const ChunkRows r = chunk_rows(M, rows_per_chunk);
  double s1[1] = {0.0}, s2[1] = {0.0};
  if (r.c < C) {
    const float mean = load(saved_mean, r.c);
#pragma unroll 4
    for (int64_t m = r.begin + threadIdx.y; m < r.end; m += blockDim.y) {
      const int64_t i = m * C + r.c;
      const float xf = to_float(x[i]);
      float dz = to_float(dy[i]);
      if (dy_other) dz = gradient_sum<T>(dz, to_float(dy_other[i]));
      if (mask.any() && !mask.on(m, r.c, i, xf)) dz = 0.f;
      s1[0] += dz;
      s2[0] += static_cast<double>(dz) * static_cast<double>(__fsub_rn(xf, mean));
    }
  }
  write_block_partials<1>(s1, s2, r.c, C, partial);
}

// What a vector partial-sum kernel adds up.
enum class Sums { moments, gradient, masked_gradient };

// Vector path of both partial-sum kernels above: the same per-element math on 16-byte
// vectors. Each thread walks its rows in increasing order, loading `kRows` rows ahead of
// the additions, so its sums are added in the same order on every run.
template <class T, Sums S>
__global__ void __launch_bounds__(kThreads) vector_partial_kernel(int64_t M, int64_t C, const T* __restrict__ x,
                                                                  const T* __restrict__ dy,
                                                                  const T* __restrict__ dy_other,
                                                                  MaskSource<T> mask,
                                                                  ChannelTensor saved_mean,
                                                                  double* __restrict__ partial) {
  constexpr int N = kWidth<T>;
  constexpr int kRows = S == Sums::moments ? 4 : 2;
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  double s1[N], s2[N];
#pragma unroll
  for (int j = 0; j < N; ++j) s1[j] = s2[j] = 0.0;
  if (c0 < C) {
    float mean[N];
    VectorAffine<T> affine;
    if constexpr (S != Sums::moments) {
#pragma unroll
      for (int j = 0; j < N; ++j) mean[j] = load(saved_mean, c0 + j);
    }
    if constexpr (S == Sums::masked_gradient) affine.load(mask, c0);
    const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
    for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < M; m += kRows * step) {
      uint4 xv[kRows], dv[kRows], ov[kRows], yv[kRows];
      unsigned bv[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t row = m + r * step;
        if (row < M) {
          const int64_t i = row * C + c0;
          xv[r] = load_vector(x + i);
          if constexpr (S != Sums::moments) dv[r] = load_vector(dy + i);
          if constexpr (S != Sums::moments)
            if (dy_other) ov[r] = load_vector(dy_other + i);
          if constexpr (S == Sums::masked_gradient) {
            if (mask.bits) bv[r] = mask.byte_from(row, c0);
            else if (mask.y) yv[r] = load_vector(mask.y + i);
          }
        }
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (m + r * step >= M) break;
        float xf[N];
        to_floats<T>(xv[r], xf);
        if constexpr (S == Sums::moments) {
#pragma unroll
          for (int j = 0; j < N; ++j) {
            const double v = xf[j];
            s1[j] += v;
            s2[j] += v * v;
          }
        } else {
          float dz[N];
          to_floats<T>(dv[r], dz);
          if (dy_other) add_gradient<T>(ov[r], dz);
          if constexpr (S == Sums::masked_gradient) mask_gradient<T>(mask, yv[r], bv[r], xf, affine, dz);
#pragma unroll
          for (int j = 0; j < N; ++j) {
            s1[j] += dz[j];
            s2[j] += static_cast<double>(dz[j]) * static_cast<double>(__fsub_rn(xf[j], mean[j]));
          }
        }
      }
    }
  }
  write_block_partials<N>(s1, s2, c0, C, partial);
}

// ---- phase 2: finalize ------------------------------------------------------------------

// Sums of channel c over every chunk: lane threadIdx.y adds chunks y, y + 32, … in order,
// then the lanes are added in a fixed tree. Every thread of the block must call it.
__device__ void channel_totals(const double* partial, int64_t chunks, int64_t C, int64_t c, double& s1,
                               double& s2) {
  __shared__ double shared[2][kFinalizeLanes][kFinalizeChannels];
  double a = 0.0, b = 0.0;
  if (c < C) {
#pragma unroll 4
    for (int64_t k = threadIdx.y; k < chunks; k += kFinalizeLanes) {
      a += partial[k * C + c];
      b += partial[(chunks + k) * C + c];
    }
  }
  shared[0][threadIdx.y][threadIdx.x] = a;
  shared[1][threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  for (unsigned half = kFinalizeLanes / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) {
      shared[0][threadIdx.y][threadIdx.x] += shared[0][threadIdx.y + half][threadIdx.x];
      shared[1][threadIdx.y][threadIdx.x] += shared[1][threadIdx.y + half][threadIdx.x];
    }
    __syncthreads();
  }
  s1 = shared[0][0][threadIdx.x];
  s2 = shared[1][0][threadIdx.x];
}

__device__ __forceinline__ int64_t finalize_channel() {
  return static_cast<int64_t>(blockIdx.x) * kFinalizeChannels + threadIdx.x;
}

__global__ void __launch_bounds__(kFinalizeChannels * kFinalizeLanes)
    train_finalize_kernel(int64_t M, int64_t C, int64_t chunks, const double* __restrict__ partial,
                          BatchNormTrainArgs a, float* __restrict__ coef) {
  const int64_t c = finalize_channel();
  double s1, s2;
  channel_totals(partial, chunks, C, c, s1, s2);
  if (threadIdx.y != 0 || c >= C) return;
  const double mean = s1 / static_cast<double>(M);
  double var = s2 / static_cast<double>(M) - mean * mean;
  if (var < 0.0) var = 0.0;  // rounding can leave a tiny negative for a constant channel
  const double invstd = 1.0 / sqrt(var + a.eps);
  const double gamma = load(a.gamma, c), beta = load(a.beta, c);
  const double rm = load(a.running_mean, c), rv = load(a.running_var, c);
  const double unbias = static_cast<double>(M) / static_cast<double>(M - 1);
  store(a.saved_mean, c, mean);
  store(a.saved_invstd, c, invstd);
  store(a.running_mean_out, c, (1.0 - a.momentum) * rm + a.momentum * mean);
  store(a.running_var_out, c, (1.0 - a.momentum) * rv + a.momentum * var * unbias);
  coef[c] = static_cast<float>(invstd * gamma);                   // scale
  coef[C + c] = static_cast<float>(beta - mean * invstd * gamma);  // shift
}

__global__ void __launch_bounds__(kFinalizeChannels * kFinalizeLanes)
    backward_finalize_kernel(int64_t M, int64_t C, int64_t chunks, const double* __restrict__ partial,
                             BatchNormBackwardArgs a, float* __restrict__ coef) {
  const int64_t c = finalize_channel();
  double dbeta, centred;
  channel_totals(partial, chunks, C, c, dbeta, centred);
  if (threadIdx.y != 0 || c >= C) return;
  const double invstd = load(a.saved_invstd, c);
  const double dgamma = centred * invstd;
  store(a.dgamma, c, dgamma);
  store(a.dbeta, c, dbeta);
  coef[c] = static_cast<float>(static_cast<double>(load(a.gamma, c)) * invstd);  // γ·invstd
  coef[C + c] = static_cast<float>(dbeta / static_cast<double>(M));                // dβ / M
  coef[2 * C + c] = static_cast<float>(invstd * dgamma / static_cast<double>(M));  // invstd·dγ / M
  coef[3 * C + c] = load(a.saved_mean, c);
}

// ---- phase 3: apply ---------------------------------------------------------------------

// Scale and shift of channel c: from the finalize kernel (training) or from the running
// statistics (coef == nullptr, inference).
__device__ __forceinline__ void affine_coefficients(const float* coef, const BatchNormInferArgs& infer, int64_t C,
                                                    int64_t c, float& scale, float& shift) {
  if (coef) {
    scale = coef[c];
    shift = coef[C + c];
  } else {
    const double invstd = 1.0 / sqrt(static_cast<double>(load(infer.running_var, c)) + infer.eps);
    const double gamma = load(infer.gamma, c);
    scale = static_cast<float>(invstd * gamma);
    shift = static_cast<float>(load(infer.beta, c) - load(infer.running_mean, c) * invstd * gamma);
  }
}

// y = x·scale[c] + shift[c] (scalar path). x and y may be the same memory.
template <class T>
__global__ void affine_apply_kernel(int64_t M, int64_t C, const T* x, T* y, const float* __restrict__ coef,
                                    BatchNormInferArgs infer) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float scale, shift;
  affine_coefficients(coef, infer, C, c, scale, shift);
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < M; m += step) {
    const int64_t i = m * C + c;
    y[i] = from_float<T>(__fadd_rn(__fmul_rn(to_float(x[i]), scale), shift));
  }
}

// Vector path of affine_apply_kernel. A thread loads kRows vectors before storing any; x and
// y are either the same memory or disjoint, and each element is read before it is written
// by the thread that owns it, so in-place application stays correct.
template <class T>
__global__ void __launch_bounds__(kThreads) vector_affine_apply_kernel(int64_t M, int64_t C, const T* x, T* y,
                                                                       const float* __restrict__ coef,
                                                                       BatchNormInferArgs infer) {
  constexpr int N = kWidth<T>, kRows = 4;
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  if (c0 >= C) return;
  float scale[N], shift[N];
#pragma unroll
  for (int j = 0; j < N; ++j) affine_coefficients(coef, infer, C, c0 + j, scale[j], shift[j]);
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < M; m += kRows * step) {
    uint4 in[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (m + r * step < M) in[r] = load_vector(x + (m + r * step) * C + c0);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (m + r * step >= M) break;
      float v[N];
      to_floats<T>(in[r], v);
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = __fadd_rn(__fmul_rn(v[j], scale[j]), shift[j]);
      store_vector(y + (m + r * step) * C + c0, from_floats<T>(v));
    }
  }
}

// dx = γ·invstd·(dz − dβ/M − (x − mean)·invstd·dγ/M), and dresidual = dz when asked
// (scalar path). Every element is read before it is written by the same thread, so outputs
// may alias inputs.
template <class T>
__global__ void backward_apply_kernel(int64_t M, int64_t C, const T* x, const T* dy, const T* dy_other,
                                      MaskSource<T> mask, T* dx, T* dresidual, const float* __restrict__ coef) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const float g = coef[c], db = coef[C + c], k = coef[2 * C + c], mean = coef[3 * C + c];
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < M; m += step) {
    const int64_t i = m * C + c;
    const float xf = to_float(x[i]);
    float dz = to_float(dy[i]);
    if (dy_other) dz = gradient_sum<T>(dz, to_float(dy_other[i]));
    if (mask.any() && !mask.on(m, c, i, xf)) dz = 0.f;
    const float centred = __fsub_rn(xf, mean);
    dx[i] = from_float<T>(__fmul_rn(g, __fsub_rn(__fsub_rn(dz, db), __fmul_rn(centred, k))));
    if (dresidual) dresidual[i] = from_float<T>(dz);
  }
}

// Vector path of backward_apply_kernel, the relu mask a template parameter; the same
// load-before-store rule as vector_affine_apply_kernel keeps aliasing outputs correct.
template <class T, bool Masked>
__global__ void __launch_bounds__(kThreads) vector_backward_apply_kernel(int64_t M, int64_t C, const T* x,
                                                                         const T* dy, const T* dy_other,
                                                                         MaskSource<T> mask, T* dx, T* dresidual,
                                                                         const float* __restrict__ coef) {
  constexpr int N = kWidth<T>, kRows = 2;
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  if (c0 >= C) return;
  float g[N], db[N], k[N], mean[N];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    g[j] = coef[c0 + j];
    db[j] = coef[C + c0 + j];
    k[j] = coef[2 * C + c0 + j];
    mean[j] = coef[3 * C + c0 + j];
  }
  VectorAffine<T> affine;
  if constexpr (Masked) affine.load(mask, c0);
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < M; m += kRows * step) {
    uint4 xv[kRows], dv[kRows], ov[kRows], yv[kRows];
    unsigned bv[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (m + r * step < M) {
        const int64_t i = (m + r * step) * C + c0;
        xv[r] = load_vector(x + i);
        dv[r] = load_vector(dy + i);
        if (dy_other) ov[r] = load_vector(dy_other + i);
        if constexpr (Masked) {
          if (mask.bits) bv[r] = mask.byte_from(m + r * step, c0);
          else if (mask.y) yv[r] = load_vector(mask.y + i);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (m + r * step >= M) break;
      const int64_t i = (m + r * step) * C + c0;
      float xf[N], dz[N], out[N];
      to_floats<T>(xv[r], xf);
      to_floats<T>(dv[r], dz);
      if (dy_other) add_gradient<T>(ov[r], dz);
      if constexpr (Masked) mask_gradient<T>(mask, yv[r], bv[r], xf, affine, dz);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const float centred = __fsub_rn(xf[j], mean[j]);
        out[j] = __fmul_rn(g[j], __fsub_rn(__fsub_rn(dz[j], db[j]), __fmul_rn(centred, k[j])));
      }
      store_vector(dx + i, from_floats<T>(out));
      if (dresidual) store_vector(dresidual + i, from_floats<T>(dz));
    }
  }
}

template <class T>
__global__ void fold_kernel(FoldBatchNormArgs a) {
  const int64_t weights = a.K * a.per_k, total = weights > a.K ? weights : a.K;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    if (i < weights) {
      const int64_t k = i / a.per_k;
      const double scale = static_cast<double>(load(a.gamma, k)) / sqrt(static_cast<double>(load(a.var, k)) + a.eps);
      static_cast<T*>(a.w_folded)[i] =
          from_float<T>(static_cast<float>(static_cast<double>(to_float(static_cast<const T*>(a.w)[i])) * scale));
    }
    if (i < a.K) {
      const double scale = static_cast<double>(load(a.gamma, i)) / sqrt(static_cast<double>(load(a.var, i)) + a.eps);
      const double b = a.bias.data ? static_cast<double>(load(a.bias, i)) : 0.0;
      store(a.b_folded, i, (b - load(a.mean, i)) * scale + load(a.beta, i));
    }
  }
}

// ---- host side --------------------------------------------------------------------------

// Blocks of kThreads threads of `Kernel` that one multiprocessor keeps resident (asked once).
template <auto Kernel>
int64_t blocks_per_sm() {
  static const int64_t cached = [] {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, kThreads, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
    }
    return static_cast<int64_t>(n > 0 ? n : 1);
  }();
  return cached;
}

// Blocks per channel tile for a grid-stride kernel of `resident` resident blocks: never more
// than one wave, never more row blocks than there are rows.
unsigned one_wave_rows(const ChannelTiling& t, int64_t M, int64_t resident) {
  const int64_t row_blocks = ceil_div(M > 0 ? M : 1, t.tile_y);
  int64_t y = std::min<int64_t>({resident / t.channel_tiles, row_blocks, kMaxGridY});
  return static_cast<unsigned>(std::max<int64_t>(y, 1));
}

// Tile shape for `columns` thread columns (channels, or channel vectors): up to 32 columns ×
// enough rows for kThreads threads.
ChannelTiling tile_columns(int64_t columns, unsigned vector) {
  ChannelTiling t;
  t.vector = vector;
  unsigned tx = 1;
  while (tx < 32 && static_cast<int64_t>(tx) < columns) tx *= 2;
  t.tile_x = tx;
  t.tile_y = kThreads / tx;
  const int64_t tiles = ceil_div(columns > 0 ? columns : 1, tx);
  if (tiles > 0x7fffffff) throw Error("batchnorm over " + std::to_string(columns) + " channel columns is more than one launch covers");
  t.channel_tiles = static_cast<unsigned>(tiles);
  return t;
}

// Scalar-path apply grid: channel tiles × enough row blocks to fill the GPU.
dim3 apply_grid(const ChannelReductionPlan& plan) {
  const ChannelTiling& t = plan.scalar;
  const int64_t row_blocks = ceil_div(plan.M > 0 ? plan.M : 1, t.tile_y);
  const int64_t per_tile = ceil_div(kMaxBlocks * 2, t.channel_tiles);
  int64_t y = row_blocks < per_tile ? row_blocks : per_tile;
  if (y > kMaxGridY) y = kMaxGridY;
  return dim3(t.channel_tiles, static_cast<unsigned>(y < 1 ? 1 : y));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % kVectorBytes == 0; }

// Whether this launch takes the vector path: C splits into vectors (the plan says) and every
// activation pointer given is 16-byte aligned (null pointers are absent operands).
bool use_vectors(const ChannelReductionPlan& plan, std::initializer_list<const void*> activations) {
  if (plan.vector.vector <= 1) return false;
  for (const void* p : activations)
    if (p && !aligned16(p)) return false;
  return true;
}

dim3 finalize_grid(int64_t C) { return dim3(static_cast<unsigned>(ceil_div(C, kFinalizeChannels))); }
const dim3 kFinalizeBlock(kFinalizeChannels, kFinalizeLanes);

}  // namespace

ChannelReductionPlan plan_channel_reduction(int64_t M, int64_t C, ElemType act, int sm_count) {
  ChannelReductionPlan plan;
  plan.M = M;
  plan.C = C;
  plan.sm_count = sm_count > 0 ? sm_count : 132;
  // Scalar path: about eight blocks per multiprocessor, never a chunk thinner than one block
  // of rows.
  ChannelTiling& s = plan.scalar;
  s = tile_columns(C, 1);
  const int64_t target_blocks = 8 * static_cast<int64_t>(plan.sm_count);
  const int64_t most_chunks = std::min<int64_t>(kMaxGridY, std::max<int64_t>(1, ceil_div(M, s.tile_y)));
  int64_t chunks = std::clamp<int64_t>(ceil_div(target_blocks, s.channel_tiles), 1, most_chunks);
  s.rows_per_chunk = M > 0 ? ceil_div(M, chunks) : 0;
  chunks = M > 0 ? ceil_div(M, s.rows_per_chunk) : 1;
  s.row_chunks = static_cast<unsigned>(chunks);
  int64_t max_chunks = chunks;
  // Vector path: one wave of the partial-sum kernel (the fewest resident blocks of its
  // variants for this dtype), a chunk being the rows that one row of blocks walks.
  const int64_t width = kVectorBytes / static_cast<int64_t>(act == ElemType::f32 ? 4 : 2);
  if (C > 0 && C % width == 0) {
    ChannelTiling& v = plan.vector;
    v = tile_columns(C / width, static_cast<unsigned>(width));
    int64_t per_sm = 1;
    dispatch_elem(act, [&](auto tag) {
      using T = decltype(tag);
      per_sm = std::min({blocks_per_sm<vector_partial_kernel<T, Sums::moments>>(),
                         blocks_per_sm<vector_partial_kernel<T, Sums::gradient>>(),
                         blocks_per_sm<vector_partial_kernel<T, Sums::masked_gradient>>()});
    });
    v.row_chunks = one_wave_rows(v, M, per_sm * plan.sm_count);
    max_chunks = std::max<int64_t>(max_chunks, v.row_chunks);
  }
  plan.workspace_bytes =
      coefficient_bytes(C) + sizeof(double) * 2 * static_cast<size_t>(max_chunks) * static_cast<size_t>(C);
  return plan;
}

void launch_batchnorm_train(ElemType act, const ChannelReductionPlan& plan, const BatchNormTrainArgs& args,
                            void* workspace, cudaStream_t stream) {
  if (plan.C <= 0) return;
  if (plan.M < 2) throw Error("batchnorm training needs more than one value per channel");
  double* partial = partial_sums(workspace, plan);
  float* coef = coefficients(workspace);
  const bool vec = use_vectors(plan, {args.x, args.y});
  dispatch_elem(act, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(args.x);
    T* y = static_cast<T*>(args.y);
    if (vec) {
      const ChannelTiling& t = plan.vector;
      const dim3 block(t.tile_x, t.tile_y);
      vector_partial_kernel<T, Sums::moments><<<dim3(t.channel_tiles, t.row_chunks), block, 0, stream>>>(
          plan.M, plan.C, x, nullptr, nullptr, MaskSource<T>{}, ChannelTensor{}, partial);
      check_launch("batchnorm vector_partial_kernel (moments)");
      train_finalize_kernel<<<finalize_grid(plan.C), kFinalizeBlock, 0, stream>>>(plan.M, plan.C, t.row_chunks,
                                                                                  partial, args, coef);
      check_launch("batchnorm train_finalize_kernel");
      constexpr auto apply = vector_affine_apply_kernel<T>;
      const unsigned rows = one_wave_rows(t, plan.M, blocks_per_sm<apply>() * plan.sm_count);
      apply<<<dim3(t.channel_tiles, rows), block, 0, stream>>>(plan.M, plan.C, x, y, coef, BatchNormInferArgs{});
      check_launch("batchnorm vector_affine_apply_kernel");
      return;
    }
    const ChannelTiling& t = plan.scalar;
    const dim3 block(t.tile_x, t.tile_y);
    moments_partial_kernel<T><<<dim3(t.channel_tiles, t.row_chunks), block, 0, stream>>>(plan.M, plan.C,
                                                                                         t.rows_per_chunk, x, partial);
    check_launch("batchnorm moments_partial_kernel");
    train_finalize_kernel<<<finalize_grid(plan.C), kFinalizeBlock, 0, stream>>>(plan.M, plan.C, t.row_chunks,
                                                                                partial, args, coef);
    check_launch("batchnorm train_finalize_kernel");
    affine_apply_kernel<T><<<apply_grid(plan), block, 0, stream>>>(plan.M, plan.C, x, y, coef, BatchNormInferArgs{});
    check_launch("batchnorm affine_apply_kernel");
  });
}

void launch_batchnorm_infer(ElemType act, const ChannelReductionPlan& plan, const BatchNormInferArgs& args,
                            cudaStream_t stream) {
  if (plan.C <= 0 || plan.M <= 0) return;
  const bool vec = use_vectors(plan, {args.x, args.y});
  dispatch_elem(act, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(args.x);
    T* y = static_cast<T*>(args.y);
    if (vec) {
      const ChannelTiling& t = plan.vector;
      constexpr auto apply = vector_affine_apply_kernel<T>;
      const unsigned rows = one_wave_rows(t, plan.M, blocks_per_sm<apply>() * plan.sm_count);
      apply<<<dim3(t.channel_tiles, rows), dim3(t.tile_x, t.tile_y), 0, stream>>>(plan.M, plan.C, x, y, nullptr,
                                                                                 args);
      check_launch("batchnorm vector_affine_apply_kernel (inference)");
      return;
    }
    const ChannelTiling& t = plan.scalar;
    affine_apply_kernel<T><<<apply_grid(plan), dim3(t.tile_x, t.tile_y), 0, stream>>>(plan.M, plan.C, x, y, nullptr,
                                                                                      args);
    check_launch("batchnorm affine_apply_kernel (inference)");
  });
}

void launch_batchnorm_backward(ElemType act, const ChannelReductionPlan& plan, const BatchNormBackwardArgs& args,
                               void* workspace, cudaStream_t stream) {
  if (plan.C <= 0) return;
  double* partial = partial_sums(workspace, plan);
  float* coef = coefficients(workspace);
  const bool vec = use_vectors(plan, {args.x, args.dy, args.dy_other, args.relu_output, args.dx, args.dresidual});
  const bool masked = args.relu_output || args.relu_bits || args.relu_affine;
  dispatch_elem(act, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(args.x);
    const T* dy = static_cast<const T*>(args.dy);
    const T* other = static_cast<const T*>(args.dy_other);
    const MaskSource<T> mask{static_cast<const T*>(args.relu_output), static_cast<const unsigned char*>(args.relu_bits),
                             args.relu_bits_row_bytes, args.relu_affine, plan.C};
    T* dx = static_cast<T*>(args.dx);
    T* dres = static_cast<T*>(args.dresidual);
    if (vec) {
      const ChannelTiling& t = plan.vector;
      const dim3 block(t.tile_x, t.tile_y), partial_grid(t.channel_tiles, t.row_chunks);
      if (masked)
        vector_partial_kernel<T, Sums::masked_gradient><<<partial_grid, block, 0, stream>>>(
            plan.M, plan.C, x, dy, other, mask, args.saved_mean, partial);
      else
        vector_partial_kernel<T, Sums::gradient><<<partial_grid, block, 0, stream>>>(
            plan.M, plan.C, x, dy, other, MaskSource<T>{}, args.saved_mean, partial);
      check_launch("batchnorm vector_partial_kernel (gradient)");
      backward_finalize_kernel<<<finalize_grid(plan.C), kFinalizeBlock, 0, stream>>>(plan.M, plan.C, t.row_chunks,
                                                                                     partial, args, coef);
      check_launch("batchnorm backward_finalize_kernel");
      if (plan.M > 0) {
        if (masked) {
          constexpr auto apply = vector_backward_apply_kernel<T, true>;
          const unsigned rows = one_wave_rows(t, plan.M, blocks_per_sm<apply>() * plan.sm_count);
          apply<<<dim3(t.channel_tiles, rows), block, 0, stream>>>(plan.M, plan.C, x, dy, other, mask, dx, dres, coef);
        } else {
          constexpr auto apply = vector_backward_apply_kernel<T, false>;
          const unsigned rows = one_wave_rows(t, plan.M, blocks_per_sm<apply>() * plan.sm_count);
          apply<<<dim3(t.channel_tiles, rows), block, 0, stream>>>(plan.M, plan.C, x, dy, other, MaskSource<T>{}, dx, dres,
                                                                   coef);
        }
        check_launch("batchnorm vector_backward_apply_kernel");
      }
      return;
    }
    const ChannelTiling& t = plan.scalar;
    const dim3 block(t.tile_x, t.tile_y);
    gradient_partial_kernel<T><<<dim3(t.channel_tiles, t.row_chunks), block, 0, stream>>>(
        plan.M, plan.C, t.rows_per_chunk, x, dy, other, mask, args.saved_mean, partial);
    check_launch("batchnorm gradient_partial_kernel");
    backward_finalize_kernel<<<finalize_grid(plan.C), kFinalizeBlock, 0, stream>>>(plan.M, plan.C, t.row_chunks,
                                                                                   partial, args, coef);
    check_launch("batchnorm backward_finalize_kernel");
    if (plan.M > 0) {
      backward_apply_kernel<T><<<apply_grid(plan), block, 0, stream>>>(plan.M, plan.C, x, dy, other, mask, dx, dres, coef);
      check_launch("batchnorm backward_apply_kernel");
    }
  });
}

void launch_fold_batchnorm(const FoldBatchNormArgs& args, cudaStream_t stream) {
  const int64_t total = std::max(args.K * args.per_k, args.K);
  if (total <= 0) return;
  dispatch_elem(args.w_type, [&](auto tag) {
    using T = decltype(tag);
    fold_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(args);
  });
  check_launch("fold_batchnorm fold_kernel");
}

}  // namespace trident::cuda::device
