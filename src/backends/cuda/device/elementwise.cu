// Element-wise kernels of the cuda backend. Each loads the storage type, computes in f32 and
// stores rounded once; f32 results equal the reference backend's bit for bit (each output is
// one IEEE operation of the same operands), and the vector and scalar paths compute the same
// bits. Vector path (every pointer 16-byte aligned): the map kernel of vector.cuh over packs
// of 16 bytes (4 f32 or 8 f16/bf16), the last n % width elements one per thread. Scalar path
// (a misaligned pointer): the same operation, one element at a time. The per-channel mul is a
// (channel packs × rows) grid instead, so a thread loads its channels' factors once and never
// divides an index.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/elementwise.h"
#include "backends/cuda/device/vector.cuh"

namespace trident::cuda::device {

namespace {

// Every operation below reads its elements [i, i + N) before it writes any of them, and
// writes only those: an output may be the memory of an input (in-place add, mul or program
// step), as in the one-element-at-a-time loop this replaces.

template <class T>
struct ReluOf {
  __device__ __forceinline__ T operator()(T e) const {
    const float v = to_float(e);
    return from_float<T>(v > 0.f ? v : 0.f);
  }
};

// dx = dy where y > 0, else 0: dy's bits pass through unconverted.
template <class T>
struct ReluGradient {
  __device__ __forceinline__ T operator()(T y, T dy) const { return to_float(y) > 0.f ? dy : from_float<T>(0.f); }
};

// a + b or a · b of two same-shape tensors, one IEEE operation per element.
template <class T, bool kMultiply>
struct AddOrMultiply {
  __device__ __forceinline__ T operator()(T a, T b) const {
    const float l = to_float(a), r = to_float(b);
    return from_float<T>(kMultiply ? __fmul_rn(l, r) : __fadd_rn(l, r));
  }
};

template <class T>
struct ClipTo {
  float lo, hi;
  __device__ __forceinline__ T operator()(T e) const {
    float v = to_float(e);
    v = v < lo ? lo : v;  // std::max(v, lo), NaN kept as the reference keeps it
    v = hi < v ? hi : v;  // std::min(v, hi)
    return from_float<T>(v);
  }
};

template <class U>
struct Fill {
  U* y;
  U bits;
  template <int N, class I>
  __device__ __forceinline__ void apply(I i) const {
    ElemPack<U, N> out;
#pragma unroll
    for (int j = 0; j < N; ++j) out.v[j] = bits;
    store_pack<N>(y + i, out);
  }
};

// The fused op's programs, per pack: x0 loaded once, then each output's steps in order, each
// "add input k" loading its pack when the step runs (after the earlier outputs' stores, as the
// element-wise loop did).
template <class T>
struct Program {
  ElementwiseProgram prog;
  template <int N, class I>
  __device__ __forceinline__ void apply(I i) const {
    const ElemPack<T, N> in0 = load_pack<N>(static_cast<const T*>(prog.inputs[0]) + i);
    float x0[N];
#pragma unroll
    for (int j = 0; j < N; ++j) x0[j] = to_float(in0.v[j]);
    for (int o = 0; o < prog.num_outputs; ++o) {
      float v[N];
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = x0[j];
      for (int s = prog.first_step[o]; s < prog.first_step[o + 1]; ++s) {
        const int step = prog.steps[s];
        if (step == ElementwiseProgram::kRelu) {
#pragma unroll
          for (int j = 0; j < N; ++j) v[j] = v[j] < 0.f ? 0.f : v[j];  // std::max(v, 0)
        } else {
          const ElemPack<T, N> in = load_pack<N>(static_cast<const T*>(prog.inputs[step]) + i);
#pragma unroll
          for (int j = 0; j < N; ++j) v[j] = __fadd_rn(v[j], to_float(in.v[j]));
        }
      }
      ElemPack<T, N> out;
#pragma unroll
      for (int j = 0; j < N; ++j) out.v[j] = from_float<T>(v[j]);
      store_pack<N>(static_cast<T*>(prog.outputs[o]) + i, out);
    }
  }
};

// y = a·b with b [channels] broadcast over the rows of a [rows, channels]. Thread
// (threadIdx.x, threadIdx.y) of block (bx, by) owns channel pack bx·blockDim.x + threadIdx.x
// (N channels, N dividing channels) and rows by·blockDim.y + threadIdx.y + k·gridDim.y·blockDim.y.
// Not __restrict__: y may be a.
template <class T, int N>
__global__ void __launch_bounds__(kThreads) mul_channels_kernel(const T* a, const T* __restrict__ b, T* y,
                                                                int64_t rows, int64_t channels) {
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * N;
  if (c0 >= channels) return;
  const ElemPack<T, N> bv = load_pack<N>(b + c0);
  float factor[N];
#pragma unroll
  for (int j = 0; j < N; ++j) factor[j] = to_float(bv.v[j]);
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.y;
  for (int64_t r = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y; r < rows; r += step) {
    const int64_t i = r * channels + c0;
    const ElemPack<T, N> av = load_pack<N>(a + i);
    ElemPack<T, N> out;
#pragma unroll
    for (int j = 0; j < N; ++j) out.v[j] = from_float<T>(__fmul_rn(to_float(av.v[j]), factor[j]));
    store_pack<N>(y + i, out);
  }
}

template <class T, int N>
void launch_mul_channels(const T* a, const T* b, T* y, int64_t n, int64_t channels, cudaStream_t stream) {
  const int64_t rows = n / channels;
  const PackTile t = pack_tile(channels / N, rows);
  const int64_t row_blocks = (rows + t.ty - 1) / t.ty;
  const int64_t want = (kMaxBlocks * 2 + t.column_blocks - 1) / t.column_blocks;  // about two waves
  int64_t grid_y = row_blocks < want ? row_blocks : want;
  grid_y = grid_y < 1 ? 1 : grid_y > 65535 ? 65535 : grid_y;
  mul_channels_kernel<T, N><<<dim3(t.column_blocks, static_cast<unsigned>(grid_y)), dim3(t.tx, t.ty), 0, stream>>>(
      a, b, y, rows, channels);
}

}  // namespace

void launch_relu(ElemType t, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    launch_unary<T>(x, y, n, ReluOf<T>{}, stream);
  });
  check_launch("relu_kernel");
}

void launch_relu_backward(ElemType t, const void* y, const void* dy, void* dx, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    launch_binary<T>(y, dy, dx, n, ReluGradient<T>{}, stream);
  });
  check_launch("relu_backward_kernel");
}

void launch_add(ElemType t, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    launch_binary<T>(a, b, y, n, AddOrMultiply<T, false>{}, stream);
  });
  check_launch("add_kernel");
}

void launch_mul(ElemType t, const void* a, const void* b, void* y, int64_t n, int64_t channels, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    constexpr int W = kPackWidth<T>;
    const T *ap = static_cast<const T*>(a), *bp = static_cast<const T*>(b);
    T* yp = static_cast<T*>(y);
    const bool aligned = all_aligned_16({a, b, y});
    if (channels <= 0) launch_map<W>(BinaryMap<T, AddOrMultiply<T, true>>{ap, bp, yp, {}}, n, aligned, stream);
    else if (aligned && channels % W == 0) launch_mul_channels<T, W>(ap, bp, yp, n, channels, stream);
    else launch_mul_channels<T, 1>(ap, bp, yp, n, channels, stream);
  });
  check_launch("mul_kernel");
}

void launch_clip(ElemType t, const void* x, void* y, int64_t n, float lo, float hi, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    launch_unary<T>(x, y, n, ClipTo<T>{lo, hi}, stream);
  });
  check_launch("clip_kernel");
}

void launch_fill16(void* y, uint16_t bits, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch_map<kPackWidth<uint16_t>>(Fill<uint16_t>{static_cast<uint16_t*>(y), bits}, n, aligned_16(y), stream);
  check_launch("fill_kernel (16-bit)");
}

void launch_fill32(void* y, uint32_t bits, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch_map<kPackWidth<uint32_t>>(Fill<uint32_t>{static_cast<uint32_t*>(y), bits}, n, aligned_16(y), stream);
  check_launch("fill_kernel (32-bit)");
}

void launch_elementwise_program(ElemType t, const ElementwiseProgram& program, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  bool aligned = true;
  for (const void* p : program.inputs) aligned = aligned && (!p || aligned_16(p));
  for (const void* p : program.outputs) aligned = aligned && (!p || aligned_16(p));
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    launch_map<kPackWidth<T>>(Program<T>{program}, n, aligned, stream);
  });
  check_launch("elementwise program_kernel");
}

}  // namespace trident::cuda::device
