// The per-channel epilogue of the convolutions: relu?(x·scale + shift + residual), one pass,
// f32 arithmetic. It finishes a convolution whose bias/residual/relu cuDNN would not fuse,
// and it is cbr's apply step (BN scale/shift from the finalize kernel, then relu).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/conv_device.h"

namespace trident::cuda::device {

namespace {

// N consecutive values of one row, loaded and stored as one access (16 bytes when vectorised).
template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <class T, class S, int N>
__global__ void channel_affine_kernel(const T* __restrict__ x, const float* __restrict__ scale,
                                      const S* __restrict__ shift, const T* residual, T* y, int64_t packs,
                                      int64_t channels, bool relu) {
  using P = Pack<T, N>;
  for (int64_t i = grid_start(); i < packs; i += grid_stride()) {
    const P in = reinterpret_cast<const P*>(x)[i];
    P res;
    if (residual) res = reinterpret_cast<const P*>(residual)[i];
    const int64_t c0 = (i * N) % channels;  // N divides channels: a pack never wraps a row
    P out;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      // Each step rounded on its own (no fused multiply-add), in the reference backend's order:
      // a fused result then sits on the same side of the ReLU's kink as the unfused one.
      float v = to_float(in.v[j]);
      if (scale) v = __fmul_rn(v, scale[c0 + j]);
      if (shift) v = __fadd_rn(v, to_float(shift[c0 + j]));
      if (residual) v = __fadd_rn(v, to_float(res.v[j]));
      if (relu) v = v > 0.f ? v : 0.f;
      out.v[j] = from_float<T>(v);
    }
    reinterpret_cast<P*>(y)[i] = out;
  }
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
  if (vectorise) {
    const int64_t packs = n / kVec;
    channel_affine_kernel<T, S, kVec>
        <<<grid_for(packs), kThreads, 0, stream>>>(x, a.scale, shift, res, y, packs, a.channels, a.relu);
  } else {
    channel_affine_kernel<T, S, 1><<<grid_for(n), kThreads, 0, stream>>>(x, a.scale, shift, res, y, n, a.channels, a.relu);
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
