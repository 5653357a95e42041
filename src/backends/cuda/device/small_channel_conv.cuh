// What the two small-channel convolution kernels share (small_channel_conv.cu,
// cbr_weight_backward.cu): the implicit-GEMM reduction index (r, s, c) read in chunks of four
// channels — 8 bytes of f16/bf16, so any C that is a multiple of 4 gathers without a remainder
// — and the gather of one output pixel's window into a shared-memory row. Device code only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/small_channel_conv.h"

namespace trident::cuda::device::small_conv {

constexpr int kChunk = 4;  // channels gathered at once (8 bytes)
constexpr int kPad = 8;    // 16-bit values of padding per shared-memory row: the eight rows an
                           // ldmatrix phase reads then start on distinct 16-byte bank groups

// Chunk j of the reduction reads channels c … c+3 of tap (r, s); live = 0 past R·S·C (the
// padding up to a multiple of 16, which reads as zeros).
struct ChunkTap {
  int r, s, c, live;
};

// The chunk table, one entry per chunk of the padded reduction, made by the whole block once.
__device__ __forceinline__ void make_chunk_taps(ChunkTap* table, const SmallConvShape& sh, int chunks) {
  const int taps = static_cast<int>(sh.taps()), C = static_cast<int>(sh.C), S = static_cast<int>(sh.S);
  for (int j = threadIdx.x; j < chunks; j += blockDim.x) {
    const int k = j * kChunk;
    if (k < taps) {
      const int tap = k / C;
      table[j] = {tap / S, tap % S, k - tap * C, 1};
    } else {
      table[j] = {0, 0, 0, 0};
    }
  }
}

// Where output pixel m's window starts in its image; valid = 0 past the last pixel.
struct WindowCorner {
  int64_t image = 0;
  int h0 = 0, w0 = 0;
  bool valid = false;
};
__device__ __forceinline__ WindowCorner window_corner(const SmallConvShape& sh, int64_t m) {
  WindowCorner w;
  if (m >= sh.rows()) return w;
  const int64_t per_image = sh.P * sh.Q;
  w.image = m / per_image;
  const int64_t pq = m - w.image * per_image;
  const int64_t p = pq / sh.Q;
  w.h0 = static_cast<int>(p * sh.stride_h - sh.pad_h);
  w.w0 = static_cast<int>((pq - p * sh.Q) * sh.stride_w - sh.pad_w);
  w.valid = true;
  return w;
}

// Four channels of x (16-bit elements) at the chunk's tap of the window, zero outside the image.
__device__ __forceinline__ uint2 gather_chunk(const void* x, const SmallConvShape& sh, const WindowCorner& w,
                                              const ChunkTap& tap) {
  if (!w.valid || !tap.live) return make_uint2(0u, 0u);
  const int h = w.h0 + tap.r, col = w.w0 + tap.s;
  if (h < 0 || h >= sh.H || col < 0 || col >= sh.W) return make_uint2(0u, 0u);
  const int64_t at = ((w.image * sh.H + h) * sh.W + col) * sh.C + tap.c;
  return __ldg(reinterpret_cast<const uint2*>(static_cast<const unsigned short*>(x) + at));
}

}  // namespace trident::cuda::device::small_conv
