// Packs of consecutive elements for the bandwidth-bound kernels (element-wise, cast, pooling):
// a pack of 16 bytes is one load or store instead of four or eight, so those kernels run near
// memory bandwidth. A pack of one element is the scalar form of the same code, taken for
// tails, misaligned pointers and channel counts that do not split into 16-byte vectors.
// Also the one-dimensional map kernel that the element-wise and cast kernels share. Included
// by .cu files only.
#pragma once
#include <cstdint>
#include <initializer_list>

#include "backends/cuda/device/common.cuh"

namespace trident::cuda::device {

// N consecutive elements, loaded and stored as one access (two 16-byte accesses when the pack
// is 32 bytes, e.g. eight f32 beside eight f16 in a cast).
template <class T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) ElemPack {
  T v[N];
};

// Elements of T in one 16-byte vector: 4 f32, 8 f16/bf16.
template <class T>
inline constexpr int kPackWidth = 16 / static_cast<int>(sizeof(T));

// `p` must be aligned to the pack (16 bytes for a full vector; the caller checked the base
// pointer and `p` lies a whole number of packs past it).
template <int N, class T>
__device__ __forceinline__ ElemPack<T, N> load_pack(const T* p) {
  return *reinterpret_cast<const ElemPack<T, N>*>(p);
}
template <int N, class T>
__device__ __forceinline__ void store_pack(T* p, const ElemPack<T, N>& v) {
  *reinterpret_cast<ElemPack<T, N>*>(p) = v;
}

inline bool aligned_16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether every given pointer is 16-byte aligned (null pointers are absent operands).
inline bool all_aligned_16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (p && !aligned_16(p)) return false;
  return true;
}

// A (pack column × row) block of kThreads threads over a [rows, packs] matrix: the smallest
// power of two of columns covering the packs, at most 32 (a warp spans whole rows of a narrow
// matrix), widened while the block would hold more row lanes than there are rows.
struct PackTile {
  unsigned tx = 1, ty = kThreads;
  unsigned column_blocks = 1;  // blocks side by side along the packs
};
inline PackTile pack_tile(int64_t packs, int64_t rows) {
  PackTile t;
  while (t.tx < 32 && static_cast<int64_t>(t.tx) < packs) t.tx *= 2;
  while (t.tx < static_cast<unsigned>(kThreads) && static_cast<int64_t>(t.tx) < packs &&
         static_cast<int64_t>(kThreads / t.tx) > rows)
    t.tx *= 2;
  t.ty = kThreads / t.tx;
  t.column_blocks = static_cast<unsigned>((packs + t.tx - 1) / t.tx);
  return t;
}

// ---- one-dimensional map over n elements ----------------------------------------------------
// `op.template apply<N>(i)` reads and writes elements [i, i + N) of its tensors. With W > 1 the
// grid-stride loop covers the n / W whole packs of W elements (every pointer of the op 16-byte
// aligned, the host checked) and the first n % W threads of the grid then take one tail
// element each; with W = 1 every element is its own pack. I is uint32_t when n < 2^31 (32-bit
// index arithmetic; no overflow of p + stride) and int64_t otherwise. No division per element.
// The op stays in parameter memory (__grid_constant__), even where it indexes its own arrays.
template <int W, class I, class Op>
__global__ void __launch_bounds__(kThreads) map_kernel(const __grid_constant__ Op op, I n) {
  const I packs = n / W;  // W a power of two: a shift
  const I start = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x;
  const I stride = static_cast<I>(gridDim.x) * blockDim.x;
  for (I p = start; p < packs; p += stride) op.template apply<W>(p * W);
  if constexpr (W > 1) {
    const I tail = n - packs * W;
    if (start < tail) op.template apply<1>(packs * W + start);
  }
}

// Launches map_kernel for `op` over n > 0 elements: packs of W when `vectors` (the caller
// checked alignment), single elements otherwise.
template <int W, class Op>
void launch_map(const Op& op, int64_t n, bool vectors, cudaStream_t stream) {
  const bool narrow = n < (int64_t{1} << 31);
  if (vectors) {
    const unsigned grid = grid_for(n / W);
    if (narrow) map_kernel<W, uint32_t><<<grid, kThreads, 0, stream>>>(op, static_cast<uint32_t>(n));
    else map_kernel<W, int64_t><<<grid, kThreads, 0, stream>>>(op, n);
  } else {
    const unsigned grid = grid_for(n);
    if (narrow) map_kernel<1, uint32_t><<<grid, kThreads, 0, stream>>>(op, static_cast<uint32_t>(n));
    else map_kernel<1, int64_t><<<grid, kThreads, 0, stream>>>(op, n);
  }
}

// map_kernel ops from a function object of one element or of two (it takes and returns raw
// elements and converts itself; its state, if any, travels with the op in parameter memory):
// y = f(x) and y = f(a, b), each pack loaded before it is stored, so y may be an input's memory.
template <class In, class Out, class F>
struct UnaryMap {
  const In* x;
  Out* y;
  F f;
  template <int N, class I>
  __device__ __forceinline__ void apply(I i) const {
    const ElemPack<In, N> in = load_pack<N>(x + i);
    ElemPack<Out, N> out;
#pragma unroll
    for (int j = 0; j < N; ++j) out.v[j] = f(in.v[j]);
    store_pack<N>(y + i, out);
  }
};
template <class T, class F>
struct BinaryMap {
  const T* a;
  const T* b;
  T* y;
  F f;
  template <int N, class I>
  __device__ __forceinline__ void apply(I i) const {
    const ElemPack<T, N> av = load_pack<N>(a + i), bv = load_pack<N>(b + i);
    ElemPack<T, N> out;
#pragma unroll
    for (int j = 0; j < N; ++j) out.v[j] = f(av.v[j], bv.v[j]);
    store_pack<N>(y + i, out);
  }
};

// Launch y = f(x) or y = f(a, b) over n elements of T: 16-byte packs where every pointer is
// aligned, single elements otherwise.
template <class T, class F>
void launch_unary(const void* x, void* y, int64_t n, F f, cudaStream_t stream) {
  launch_map<kPackWidth<T>>(UnaryMap<T, T, F>{static_cast<const T*>(x), static_cast<T*>(y), f}, n,
                            all_aligned_16({x, y}), stream);
}
template <class T, class F>
void launch_binary(const void* a, const void* b, void* y, int64_t n, F f, cudaStream_t stream) {
  launch_map<kPackWidth<T>>(
      BinaryMap<T, F>{static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), f}, n,
      all_aligned_16({a, b, y}), stream);
}

}  // namespace trident::cuda::device
