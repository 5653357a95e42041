// The cast kernel of mixed precision: the fp16/bf16 copies of the f32 master weights and
// images each step, and the gradients' way back to f32. Bandwidth-bound: one read, one write.
// Vector path (both pointers 16-byte aligned): packs of 8 elements, i.e. 16 bytes of f16/bf16
// beside 32 bytes of f32, through the map kernel of vector.cuh, the last n % 8 elements one per
// thread. Scalar path (a misaligned pointer): one element per thread. Both round the same way.
// cast_group converts many tensors (a network's weights) in one launch, in the same packs.
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/cast.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/vector.cuh"

namespace trident::cuda::device {

namespace {

constexpr int kCastPack = 8;  // elements per pack: 16 bytes of the 16-bit side

template <class From, class To>
struct ConvertTo {
  __device__ __forceinline__ To operator()(From x) const { return from_float<To>(to_float(x)); }
};
template <class From, class To>
using Cast = UnaryMap<From, To, ConvertTo<From, To>>;

// One block row per span (blockIdx.y), its blocks striding over the span's elements; the same
// conversion as Cast, in packs of 8 where both pointers are 16-byte aligned (one element a
// thread would keep too few bytes in flight to reach the memory's bandwidth), else one by one.
template <class From, class To>
__global__ void cast_group_kernel(CastSpans spans) {
  const CastSpan s = spans.span[blockIdx.y];
  const Cast<From, To> cast{static_cast<const From*>(s.x), static_cast<To*>(s.y), {}};
  const int64_t lane = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t lanes = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t done = 0;
  if (reinterpret_cast<uintptr_t>(s.x) % 16 == 0 && reinterpret_cast<uintptr_t>(s.y) % 16 == 0) {
    const int64_t packs = s.n / kCastPack;
    for (int64_t k = lane; k < packs; k += lanes) cast.template apply<kCastPack>(k * kCastPack);
    done = packs * kCastPack;
  }
  for (int64_t i = done + lane; i < s.n; i += lanes) cast.template apply<1>(i);
}

}  // namespace

void launch_cast_group(ElemType from, ElemType to, const CastSpans& spans, cudaStream_t stream) {
  if (spans.count <= 0 || spans.longest <= 0) return;
  // About one pack a thread over the longest span; shorter spans leave blocks idle early.
  const int64_t blocks =
      std::clamp<int64_t>((spans.longest + kCastPack * kThreads - 1) / (kCastPack * kThreads), 1, 1024);
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
      launch_map<kCastPack>(Cast<F, T>{static_cast<const F*>(x), static_cast<T*>(y), {}}, n, aligned, stream);
    });
  });
  check_launch("cast_kernel");
}

}  // namespace trident::cuda::device
