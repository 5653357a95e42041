// The cast kernel of mixed precision: the fp16/bf16 copies of the f32 master weights and
// images each step, and the gradients' way back to f32. Bandwidth-bound: one read, one write.
// Vector path (both pointers 16-byte aligned): packs of 8 elements, i.e. 16 bytes of f16/bf16
// beside 32 bytes of f32, through the map kernel of vector.cuh, the last n % 8 elements one per
// thread. Scalar path (a misaligned pointer): one element per thread. Both round the same way.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/cast.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/vector.cuh"

namespace trident::cuda::device {

namespace {

constexpr int kCastPack = 8;  // elements per pack: 16 bytes of the 16-bit side

template <class From, class To>
struct Cast {
  const From* x;
  To* y;
  template <int N, class I>
  __device__ __forceinline__ void apply(I i) const {
    const ElemPack<From, N> in = load_pack<N>(x + i);
    ElemPack<To, N> out;
#pragma unroll
    for (int j = 0; j < N; ++j) out.v[j] = from_float<To>(to_float(in.v[j]));
    store_pack<N>(y + i, out);
  }
};

}  // namespace

void launch_cast(ElemType from, const void* x, ElemType to, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const bool aligned = all_aligned_16({x, y});
  dispatch_elem(from, [&](auto f) {
    dispatch_elem(to, [&](auto t) {
      using F = decltype(f);
      using T = decltype(t);
      launch_map<kCastPack>(Cast<F, T>{static_cast<const F*>(x), static_cast<T*>(y)}, n, aligned, stream);
    });
  });
  check_launch("cast_kernel");
}

}  // namespace trident::cuda::device
