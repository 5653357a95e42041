// The per-channel epilogue of the convolutions: relu?(x·scale + shift + residual), one pass,
// f32 arithmetic; the residual may itself go through a batchnorm affine first (a projection
// shortcut's batchnorm, applied here instead of by a kernel of its own). It finishes a convolution whose bias/residual/relu cuDNN would not fuse,
// and it is cbr's apply step (BN scale/shift from the finalize kernel, then relu), where it
// may also write the packed relu mask of the backward (core/relu_mask.h).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/conv_device.h"

#include <algorithm>
#include <string>

namespace trident::cuda::device {

namespace {

// N consecutive values of one row, loaded and stored as one access (16 bytes when vectorised).
template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// One element: each step rounded on its own (no fused multiply-add), in the reference
// backend's order: a fused result then sits on the same side of the ReLU's kink as the
// unfused one.
template <class T, class S>
__device__ __forceinline__ T affine(T x, const float* scale, const S* shift, const T* residual_value,
                                    const float* residual_affine, int64_t channels, int64_t c, bool relu,
                                    float relu_max = 0.f) {
  float v = to_float(x);
  if (scale) v = __fmul_rn(v, scale[c]);
  if (shift) v = __fadd_rn(v, to_float(shift[c]));
  if (residual_value) {
    float r = to_float(*residual_value);
    if (residual_affine) r = __fadd_rn(__fmul_rn(r, residual_affine[c]), residual_affine[channels + c]);
    v = __fadd_rn(v, r);
  }
  if (relu) v = v > 0.f ? v : 0.f;
  if (relu && relu_max > 0.f && v > relu_max) v = relu_max;  // ReLU6 and other bounded ReLUs
  return from_float<T>(v);
}

// Writes the mask byte of channels c0 … c0 + 7 of `row`, and zeroes the row's padding bytes
// after the last channel's byte.
__device__ __forceinline__ void store_mask_byte(unsigned char* mask, int64_t row_bytes, int64_t row, int64_t c0,
                                                int64_t channels, unsigned bits) {
  unsigned char* r = mask + row * row_bytes;
  r[c0 / 8] = static_cast<unsigned char>(bits);
  if (c0 + 8 == channels)
    for (int64_t b = channels / 8; b < row_bytes; ++b) r[b] = 0;
}

template <class T, class S, int N>
__global__ void channel_affine_kernel(const T* __restrict__ x, const float* __restrict__ scale,
                                      const S* __restrict__ shift, const T* residual,
                                      const float* __restrict__ residual_affine, T* y, int64_t packs,
                                      int64_t channels, bool relu, float relu_max) {
  using P = Pack<T, N>;
  for (int64_t i = grid_start(); i < packs; i += grid_stride()) {
    const P in = reinterpret_cast<const P*>(x)[i];
    P res;
    if (residual) res = reinterpret_cast<const P*>(residual)[i];
    const int64_t c0 = (i * N) % channels;  // N divides channels: a pack never wraps a row
    P out;
#pragma unroll
    for (int j = 0; j < N; ++j)
      out.v[j] = affine<T, S>(in.v[j], scale, shift, residual ? &res.v[j] : nullptr, residual_affine, channels, c0 + j,
                              relu, relu_max);
    reinterpret_cast<P*>(y)[i] = out;
  }
}

// The same with the relu mask: a thread owns 8 consecutive channels of a row (one mask byte),
// loaded as one 16-byte vector when T is 16-bit and the pointers allow (Vector), else one by one.
template <class T, class S, bool Vector>
__global__ void masked_channel_affine_kernel(const T* __restrict__ x, const float* __restrict__ scale,
                                             const S* __restrict__ shift, const T* residual,
                                             const float* __restrict__ residual_affine, T* y,
                                             unsigned char* __restrict__ mask, int64_t row_bytes, int64_t groups,
                                             int64_t channels) {
  using P = Pack<T, 8>;
  for (int64_t i = grid_start(); i < groups; i += grid_stride()) {
    const int64_t first = i * 8, row = first / channels, c0 = first % channels;
    T in[8], res[8], out[8];
    if constexpr (Vector) {
      const P p = reinterpret_cast<const P*>(x)[i];
#pragma unroll
      for (int j = 0; j < 8; ++j) in[j] = p.v[j];
      if (residual) {
        const P q = reinterpret_cast<const P*>(residual)[i];
#pragma unroll
        for (int j = 0; j < 8; ++j) res[j] = q.v[j];
      }
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        in[j] = x[first + j];
        if (residual) res[j] = residual[first + j];
      }
    }
    unsigned bits = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      out[j] = affine<T, S>(in[j], scale, shift, residual ? &res[j] : nullptr, residual_affine, channels, c0 + j, true);
      if (to_float(out[j]) > 0.f) bits |= 1u << j;
    }
    if constexpr (Vector) {
      P p;
#pragma unroll
      for (int j = 0; j < 8; ++j) p.v[j] = out[j];
      reinterpret_cast<P*>(y)[i] = p;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) y[first + j] = out[j];
    }
    store_mask_byte(mask, row_bytes, row, c0, channels, bits);
  }
}

// The same over 16-byte vectors, tiled: a thread owns one vector of 8 consecutive channels for
// every row it visits (threadIdx.x, blockIdx.x), so its scale, shift and residual affine are
// loaded once into registers instead of once an element, and it loads kRows rows before it
// stores any (threadIdx.y, blockIdx.y stride the rows). Only for 16-bit T with C % 8 == 0.
template <class T, class S, bool Residual, bool ResidualAffine>
__global__ void __launch_bounds__(kThreads, 3)
    tiled_masked_affine_kernel(const T* __restrict__ x, const float* __restrict__ scale, const S* __restrict__ shift,
                               const T* residual, const float* __restrict__ residual_affine, T* y,
                               unsigned char* __restrict__ mask, int64_t row_bytes, int64_t rows, int64_t channels) {
  using P = Pack<T, 8>;
  constexpr int kRows = 2;
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (c0 >= channels) return;
  float sc[8], sh[8], rs[8], rb[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    sc[j] = scale ? scale[c0 + j] : 1.f;
    sh[j] = shift ? to_float(shift[c0 + j]) : 0.f;
    if constexpr (ResidualAffine) {
      rs[j] = residual_affine[c0 + j];
      rb[j] = residual_affine[channels + c0 + j];
    }
  }
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t m = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; m < rows; m += kRows * step) {
    P in[kRows], res[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (m + r * step >= rows) break;
      const int64_t i = (m + r * step) * channels + c0;
      in[r] = *reinterpret_cast<const P*>(x + i);
      if constexpr (Residual) res[r] = *reinterpret_cast<const P*>(residual + i);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t row = m + r * step;
      if (row >= rows) break;
      P out;
      unsigned bits = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        // The arithmetic of affine() above, step by step, with the constants from registers.
        float v = __fadd_rn(__fmul_rn(to_float(in[r].v[j]), sc[j]), sh[j]);
        if constexpr (Residual) {
          float q = to_float(res[r].v[j]);
          if constexpr (ResidualAffine) q = __fadd_rn(__fmul_rn(q, rs[j]), rb[j]);
          v = __fadd_rn(v, q);
        }
        out.v[j] = from_float<T>(v > 0.f ? v : 0.f);
        if (to_float(out.v[j]) > 0.f) bits |= 1u << j;
      }
      *reinterpret_cast<P*>(y + row * channels + c0) = out;
      store_mask_byte(mask, row_bytes, row, c0, channels, bits);
    }
  }
}

// Grid of the tiled kernel: channel vectors across (up to 32 a block), rows down, one wave of
// resident blocks.
template <auto Kernel, class... Args>
void launch_tiled(int64_t rows, int64_t channels, int sm_count, cudaStream_t stream, Args... args) {
  static const int per_sm = [] {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, kThreads, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
    }
    return n > 0 ? n : 1;
  }();
  const int64_t vectors = channels / 8;
  unsigned tx = 1;
  while (tx < 32 && static_cast<int64_t>(tx) < vectors) tx *= 2;
  const unsigned ty = kThreads / tx;
  const int64_t tiles = (vectors + tx - 1) / tx, row_blocks = (rows + ty - 1) / ty;
  const int64_t resident = static_cast<int64_t>(per_sm) * (sm_count > 0 ? sm_count : 132);
  const int64_t down = std::clamp<int64_t>(std::min(resident / std::max<int64_t>(tiles, 1), row_blocks), 1, 65535);
  if (tiles > 0x7fffffff) throw Error("the channel epilogue over " + std::to_string(channels) + " channels is more than one launch covers");
  Kernel<<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(down)), dim3(tx, ty), 0, stream>>>(args...);
}

template <class T, class S, bool Residual, bool ResidualAffine>
void launch_masked_tiled(const ChannelAffineArgs& a, const T* x, const S* shift, const T* residual, T* y,
                         unsigned char* mask, cudaStream_t stream) {
  launch_tiled<tiled_masked_affine_kernel<T, S, Residual, ResidualAffine>>(
      a.rows, a.channels, a.sm_count, stream, x, a.scale, shift, residual, a.residual_affine, y, mask,
      a.mask_row_bytes, a.rows, a.channels);
}

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <class T, class S>
void launch_typed(const ChannelAffineArgs& a, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t n = a.rows * a.channels;
  const bool vectorise = a.channels % kVec == 0 && aligned16(a.x) && aligned16(a.residual) && aligned16(a.y);
  const T* x = static_cast<const T*>(a.x);
  const S* shift = static_cast<const S*>(a.shift);
  const T* res = static_cast<const T*>(a.residual);
  T* y = static_cast<T*>(a.y);
  if (a.mask) {
    if (!a.relu || a.channels % 8 != 0) throw Error("the relu mask needs the relu and a multiple of 8 channels");
    if (a.relu_max > 0.f) throw Error("the relu mask is of an unbounded relu");
    const int64_t groups = n / 8;
    auto* mask = static_cast<unsigned char*>(a.mask);
    bool vectorised = false;
    if constexpr (sizeof(T) == 2) {
      if (vectorise) {
        if (!res) launch_masked_tiled<T, S, false, false>(a, x, shift, res, y, mask, stream);
        else if (!a.residual_affine) launch_masked_tiled<T, S, true, false>(a, x, shift, res, y, mask, stream);
        else launch_masked_tiled<T, S, true, true>(a, x, shift, res, y, mask, stream);
        vectorised = true;
      }
    }
    if (!vectorised)
      masked_channel_affine_kernel<T, S, false><<<grid_for(groups), kThreads, 0, stream>>>(
          x, a.scale, shift, res, a.residual_affine, y, mask, a.mask_row_bytes, groups, a.channels);
    check_launch("masked_channel_affine_kernel");
    return;
  }
  if (vectorise) {
    const int64_t packs = n / kVec;
    channel_affine_kernel<T, S, kVec>
        <<<grid_for(packs), kThreads, 0, stream>>>(x, a.scale, shift, res, a.residual_affine, y, packs, a.channels,
                                                   a.relu, a.relu_max);
  } else {
    channel_affine_kernel<T, S, 1><<<grid_for(n), kThreads, 0, stream>>>(x, a.scale, shift, res, a.residual_affine, y, n,
                                                                         a.channels, a.relu, a.relu_max);
  }
  check_launch("channel_affine_kernel");
}

}  // namespace

void launch_channel_affine(const ChannelAffineArgs& a, cudaStream_t stream) {
  if (a.rows <= 0 || a.channels <= 0) return;
  dispatch_elem(a.io, [&](auto tag) {
    using T = decltype(tag);
    if (a.shift == nullptr || a.shift_type == ElemType::f32) {
      launch_typed<T, float>(a, stream);
    } else if (a.shift_type == a.io) {
      launch_typed<T, T>(a, stream);
    } else {
      throw Error("the per-channel epilogue takes its shift in f32 or in the activation dtype");
    }
  });
}

}  // namespace trident::cuda::device
