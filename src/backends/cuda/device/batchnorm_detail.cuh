// Internals shared by the batchnorm kernels' files (batchnorm_statistics.cu, batchnorm_forward.cu,
// batchnorm_backward.cu, batchnorm_fold.cu): the workspace layout, the 16-byte channel vectors
// and their f32 conversions, the relu mask sources of the fused backward, the launch geometry,
// and the statistics launchers (phases 1 and 2) that the forward and backward follow with their
// apply. Device code only (included by .cu files); the public interface is batchnorm.h.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/batchnorm.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pool_gather.cuh"

namespace trident::cuda::device::batchnorm_detail {

constexpr int64_t kMaxGridY = 65535;
constexpr int kCoefficients = 4;  // f32 values per channel after the partial sums
constexpr int kVectorBytes = 16;
// Finalize block shape: a layer's partial sums are a few hundred chunks × C, so each block takes
// few channels and many lanes over the chunks (C = 256: 16 blocks, each lane ~6 chunks); with
// 32 × 32 the finalize of a 256-channel layer ran on 8 blocks and took 8 µs on an H200.
constexpr unsigned kFinalizeChannels = 16, kFinalizeLanes = 64;

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The workspace holds the coefficients (kCoefficients × C f32), then the partial sums
// ([2][chunks][C] f64) of whichever path the launch takes, then a sync-BN's totals ([2][C] f64
// of this rank, then [2][C] over the ranks) at plan.totals_offset.
inline size_t coefficient_bytes(int64_t C) { return align_up(sizeof(float) * kCoefficients * static_cast<size_t>(C)); }
inline float* coefficients(void* workspace) { return static_cast<float*>(workspace); }
inline double* partial_sums(void* workspace, const ChannelReductionPlan& plan) {
  return reinterpret_cast<double*>(static_cast<char*>(workspace) + coefficient_bytes(plan.C));
}
inline double* rank_totals(void* workspace, const ChannelReductionPlan& plan) {
  return reinterpret_cast<double*>(static_cast<char*>(workspace) + plan.totals_offset);
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
    const float2 pair = widen_pair<T>(word(v, w));
    f[2 * w] = pair.x;
    f[2 * w + 1] = pair.y;
  }
}
template <class T>
__device__ __forceinline__ void to_floats(const uint4& v, float (&f)[kWidth<T>]) {
  if constexpr (std::is_same_v<T, float>) unpack(v, f);
  else unpack<T>(v, f);
}

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
    for (int i = 0; i < 4; ++i) w[i] = pack_rounded<T>(f[2 * i], f[2 * i + 1]);
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
// (defer_bn_apply). None of them: no mask. With relu_max > 0 the relu was clipped there
// (ReLU6) and y's mask is 0 < y < relu_max.
template <class T>
struct MaskSource {
  const T* y = nullptr;
  const unsigned char* bits = nullptr;
  int64_t row_bytes = 0;
  const float* affine = nullptr;
  int64_t channels = 0;
  float relu_max = 0.f;
  __host__ __device__ bool any() const { return y || bits || affine; }
  __device__ __forceinline__ bool passes(float y_value) const {
    return y_value > 0.f && (relu_max <= 0.f || y_value < relu_max);
  }
  __device__ __forceinline__ bool recomputed_on(float x, int64_t c) const {
    return rounds_positive<T>(__fadd_rn(__fmul_rn(x, affine[c]), affine[channels + c]));
  }
  __device__ __forceinline__ bool on(int64_t m, int64_t c, int64_t i, float x) const {
    if (bits) return (bits[m * row_bytes + c / 8] >> (c % 8)) & 1u;
    if (affine) return recomputed_on(x, c);
    return passes(to_float(y[i]));
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
      if (!rounds_positive<T>(__fadd_rn(__fmul_rn(x[j], affine.scale[j]), affine.shift[j]))) dz[j] = 0.f;
    }
    return;
  }
  float yf[kWidth<T>];
  to_floats<T>(y, yf);
#pragma unroll
  for (int j = 0; j < kWidth<T>; ++j)
    if (!mask.passes(yf[j])) dz[j] = 0.f;
}

// A dy that is a max pooling's gradient (BatchNormBackwardArgs::dy_window_index): the incoming
// gradient of row m is gathered from it as maxpool2d_index_backward gathers, rounded to T as
// that op stores it. `index` null: dy is the row's gradient itself. The vector paths take
// tiling windows only (TiledWindows: one term per cell, no loop, 32-bit arithmetic, so the
// kernels keep their registers); any other window runs on the scalar path's general gather.
template <class T>
struct PooledDy {
  const unsigned char* index = nullptr;
  PoolGeometry window;
  TiledWindows tiled;
  __host__ __device__ bool any() const { return index != nullptr; }
  // Channels c0 … c0 + kWidth<T> − 1 of row m as one 16-byte vector of T (vector paths, tiled
  // windows): dy at the window's winner, 0 elsewhere, added to 0 as the gather adds.
  __device__ __forceinline__ uint4 vector_at(const T* dy, int64_t m, int64_t c0) const {
    constexpr int N = kWidth<T>;
    uint32_t row = 0, cell = 0;
    float acc[N];
#pragma unroll
    for (int j = 0; j < N; ++j) acc[j] = 0.f;
    if (tiled.locate(static_cast<uint32_t>(m), row, cell)) {
      const uint32_t o = row * static_cast<uint32_t>(window.C) + static_cast<uint32_t>(c0);
      const ElemPack<unsigned char, N> a = load_pack<N>(index + o);
      const ElemPack<T, N> d = load_pack<N>(dy + o);
#pragma unroll
      for (int j = 0; j < N; ++j)
        if (a.v[j] == cell) acc[j] = __fadd_rn(acc[j], to_float(d.v[j]));
    }
    return from_floats<T>(acc);
  }
  __device__ __forceinline__ float at(const T* dy, int64_t m, int64_t c) const {
    const PooledCell cell = cell_of_row(window, m);
    float acc[1];
    gather_pooled_gradient<1>(window, index, dy, cell.n, cell.h, cell.w, c, acc);
    return to_float(from_float<T>(acc[0]));
  }
};

// What the backward's statistics and apply both read, typed: x, dy (or the pooled gradient it
// is gathered from), dy_other (or null) and the relu mask (none: no mask), from the launch
// arguments.
template <class T>
struct BackwardInputs {
  const T* x;
  const T* dy;
  const T* dy_other;
  MaskSource<T> mask;
  PooledDy<T> pooled;
  bool masked() const { return mask.any(); }
};
template <class T>
BackwardInputs<T> backward_inputs(const BatchNormBackwardArgs& a, int64_t C) {
  return {static_cast<const T*>(a.x),
          static_cast<const T*>(a.dy),
          static_cast<const T*>(a.dy_other),
          {static_cast<const T*>(a.relu_output), static_cast<const unsigned char*>(a.relu_bits), a.relu_bits_row_bytes,
           a.relu_affine, C, a.relu_max},
          {static_cast<const unsigned char*>(a.dy_window_index), a.dy_window,
           a.dy_window_index ? TiledWindows(a.dy_window) : TiledWindows()}};
}

// ---- launch geometry ----------------------------------------------------------------------

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
inline unsigned one_wave_rows(const ChannelTiling& t, int64_t M, int64_t resident) {
  const int64_t row_blocks = ceil_div(M > 0 ? M : 1, t.tile_y);
  int64_t y = std::min<int64_t>({resident / t.channel_tiles, row_blocks, kMaxGridY});
  return static_cast<unsigned>(std::max<int64_t>(y, 1));
}

// Scalar-path apply grid: channel tiles × enough row blocks to fill the GPU.
inline dim3 apply_grid(const ChannelReductionPlan& plan) {
  const ChannelTiling& t = plan.scalar;
  const int64_t row_blocks = ceil_div(plan.M > 0 ? plan.M : 1, t.tile_y);
  const int64_t per_tile = ceil_div(kMaxBlocks * 2, t.channel_tiles);
  int64_t y = row_blocks < per_tile ? row_blocks : per_tile;
  if (y > kMaxGridY) y = kMaxGridY;
  return dim3(t.channel_tiles, static_cast<unsigned>(y < 1 ? 1 : y));
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % kVectorBytes == 0; }

// Whether this launch takes the vector path: C splits into vectors (the plan says) and every
// activation pointer given is 16-byte aligned (null pointers are absent operands).
inline bool use_vectors(const ChannelReductionPlan& plan, std::initializer_list<const void*> activations) {
  if (plan.vector.vector <= 1) return false;
  for (const void* p : activations)
    if (p && !aligned16(p)) return false;
  return true;
}

// ---- phases 1 and 2 (batchnorm_statistics.cu) ----------------------------------------------

// Training forward: Σx and Σx² per channel, then the finalize that writes the saved and
// running statistics and the apply's scale and shift into the workspace's coefficients.
// `vectors`: the launch takes the vector tiling (use_vectors over every activation the
// whole forward touches, so the apply agrees).
void launch_train_statistics(ElemType act, const ChannelReductionPlan& plan, const BatchNormTrainArgs& args,
                             bool vectors, void* workspace, cudaStream_t stream, const RankSum* over_ranks);
// Backward: Σdz and Σdz·(x − mean) per channel (dz masked by the relu when the args give a
// mask), then the finalize that writes dγ, dβ and the backward apply's coefficients.
void launch_backward_statistics(ElemType act, const ChannelReductionPlan& plan, const BatchNormBackwardArgs& args,
                                bool vectors, void* workspace, cudaStream_t stream, const RankSum* over_ranks);

}  // namespace trident::cuda::device::batchnorm_detail
