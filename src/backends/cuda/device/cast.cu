// The cast kernel of mixed precision: the fp16/bf16 copies of the f32 master weights and
// images each step, and the gradients' way back to f32. Bandwidth-bound: one read, one write.
// Vector path (both pointers 16-byte aligned): packs of 8 elements, i.e. 16 bytes of f16/bf16
// beside 32 bytes of f32, through the map kernel of vector.cuh, the last n % 8 elements one per
// thread. Scalar path (a misaligned pointer): one element per thread. Both round the same way.
// cast_group converts many tensors (a network's weights) in one launch, one element a thread.
#include <algorithm>

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

// One block row per span (blockIdx.y), its blocks striding over the span's elements; the same
// conversion as Cast, one element per thread.
template <class From, class To>
__global__ void cast_group_kernel(CastSpans spans) {
  const CastSpan s = spans.span[blockIdx.y];
  const From* x = static_cast<const From*>(s.x);
  To* y = static_cast<To*>(s.y);
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < s.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = from_float<To>(to_float(x[i]));
}

}  // namespace

void launch_cast_group(ElemType from, ElemType to, const CastSpans& spans, cudaStream_t stream) {
  if (spans.count <= 0 || spans.longest <= 0) return;
  // About four elements a thread over the longest span; shorter spans leave blocks idle early.
  const int64_t blocks = std::clamp<int64_t>((spans.longest + 4 * kThreads - 1) / (4 * kThreads), 1, 1024);
  dispatch_elem(from, [&](auto f) {
    dispatch_elem(to, [&](auto t) {
      cast_group_kernel<decltype(f), decltype(t)>
          <<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(spans.count)), kThreads, 0, stream>>>(spans);
    });
  });
  check_launch("cast_group_kernel");
}

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
