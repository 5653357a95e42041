// What the two small-channel convolution kernels share (small_channel_conv.cu,
// cbr_weight_backward.cu): the implicit-GEMM reduction index (r, s, c) read in chunks of four
// channels — 8 bytes of f16/bf16, so any C that is a multiple of 4 gathers without a remainder
// — and the gather of one output pixel's window into a shared-memory row, by asynchronous
// copies that the kernels keep in flight behind the previous tile's work. Device code only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/async_copy.cuh"
#include "backends/cuda/device/fast_divide.h"
#include "backends/cuda/device/small_channel_conv.h"

namespace trident::cuda::device::small_conv {

constexpr int kChunk = 4;  // channels gathered at once (8 bytes)
constexpr int kPad = 8;    // 16-bit values of padding per shared-memory row: the eight rows an
                           // ldmatrix phase reads then start on distinct 16-byte bank groups

constexpr int kTileRows = 128;  // output pixels per tile, in both kernels

// Tiles of kTileRows output pixels over the convolution's N·P·Q rows.
inline int64_t tile_count(const SmallConvShape& sh) { return (sh.rows() + kTileRows - 1) / kTileRows; }

constexpr int kOutside = 1 << 28;  // a window row that lies below every image: reads zeros

// Chunk j of the reduction reads channels c … c+3 of tap (r, s), `offset` elements from the
// window's corner. Past R·S·C (the padding up to a multiple of 16) r is kOutside, so the bounds
// test alone makes those chunks zeros.
struct ChunkTap {
  int r, s, offset, unused;
};

// The chunk table, one entry per chunk of the padded reduction, made by the whole block once.
__device__ __forceinline__ void make_chunk_taps(ChunkTap* table, const SmallConvShape& sh, int chunks) {
  const int taps = static_cast<int>(sh.taps()), C = static_cast<int>(sh.C), S = static_cast<int>(sh.S);
  const int W = static_cast<int>(sh.W);
  for (int j = threadIdx.x; j < chunks; j += blockDim.x) {
    const int k = j * kChunk;
    if (k < taps) {
      const int tap = k / C, r = tap / S, s = tap % S, c = k - tap * C;
      table[j] = {r, s, (r * W + s) * C + c, 0};
    } else {
      table[j] = {kOutside, 0, 0, 0};
    }
  }
}

// Splits an output pixel's index (below 2^31: small_conv_refusal) into image, row and column.
struct PixelSplit {
  FastDivider per_image, per_row;  // by P·Q, by Q
  PixelSplit() = default;
  explicit PixelSplit(const SmallConvShape& sh)
      : per_image(static_cast<uint32_t>(sh.P * sh.Q)), per_row(static_cast<uint32_t>(sh.Q)) {}
};

// Where output pixel m's window starts: its top-left input pixel (h0, w0), possibly in the
// padding, and that pixel's element offset in x. Past the last pixel h0 is kOutside.
struct WindowCorner {
  int64_t base = 0;
  int h0 = kOutside, w0 = 0;
};
__device__ __forceinline__ WindowCorner window_corner(const SmallConvShape& sh, const PixelSplit& split, int64_t m) {
  WindowCorner w;
  if (m >= sh.rows()) return w;
  const uint32_t pixel = static_cast<uint32_t>(m);
  const uint32_t image = split.per_image.quotient(pixel);
  const uint32_t pq = pixel - image * split.per_image.divisor;
  const uint32_t p = split.per_row.quotient(pq);
  const uint32_t q = pq - p * split.per_row.divisor;
  w.h0 = static_cast<int>(p * sh.stride_h - sh.pad_h);
  w.w0 = static_cast<int>(q * sh.stride_w - sh.pad_w);
  w.base = ((static_cast<int64_t>(image) * sh.H + w.h0) * sh.W + w.w0) * sh.C;
  return w;
}

// Starts the copy of four channels of x (16-bit elements) at the chunk's tap of the window into
// `dst` (shared, 8-byte aligned); zeros outside the image, past the reduction and past the last
// pixel. The caller commits and waits (async_copy.cuh).
__device__ __forceinline__ void gather_chunk_async(void* dst, const void* x, const SmallConvShape& sh,
                                                   const WindowCorner& w, const ChunkTap& tap) {
  const int h = w.h0 + tap.r, col = w.w0 + tap.s;
  const bool inside = static_cast<unsigned>(h) < static_cast<unsigned>(sh.H) &&
                      static_cast<unsigned>(col) < static_cast<unsigned>(sh.W);
  async_copy::copy<8>(dst, static_cast<const unsigned short*>(x) + (inside ? w.base + tap.offset : 0), inside);
}

// Starts the copies of chunks first, first + step, … (< chunks) of one output pixel's window
// into its row of the gathered tile (16-bit elements).
__device__ __forceinline__ void gather_window_async(void* row, const void* x, const SmallConvShape& sh,
                                                    const WindowCorner& w, const ChunkTap* taps, int first, int step,
                                                    int chunks) {
  for (int j = first; j < chunks; j += step)
    gather_chunk_async(static_cast<unsigned short*>(row) + j * kChunk, x, sh, w, taps[j]);
}

}  // namespace trident::cuda::device::small_conv
