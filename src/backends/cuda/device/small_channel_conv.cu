// The forward of trident's small-channel convolution (small_channel_conv.h says when and why):
// conv2d + per-channel Σ, Σ² in one pass, an implicit GEMM on the tensor cores. A persistent
// grid walks tiles of 128 output pixels × 64 channels; per tile the block gathers each pixel's
// window (R·S·C values, padded to a multiple of 16) into shared memory — by asynchronous
// copies issued one tile ahead, in flight during the tile before — eight warps multiply it
// with the block's 64 filters (resident in shared memory for the whole walk) by mma.sync, and
// the epilogue rounds to the io dtype, adds the rounded values to the thread's running sums and
// stages the tile so that it leaves as whole 16-byte rows. The statistics are the block's
// partial sums, added by the channel-sums combine kernel in a fixed order.
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/async_copy.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/conv_device.h"
#include "backends/cuda/device/mma.cuh"
#include "backends/cuda/device/small_channel_conv.cuh"
#include "ops/cbr_weight_backward.h"

namespace trident::cuda::device {

namespace {

using small_conv::ChunkTap;
using small_conv::kChunk;
using small_conv::kPad;
using small_conv::kTileRows;

constexpr int kTileCols = 64;   // output channels per block
constexpr int kBlock = 256;     // 8 warps: 4 along the rows × 2 along the channels, 32 × 32 each
constexpr int kMostTaps = 256;  // R·S·C padded: the gathered tile stays within shared memory

struct ForwardParams {
  SmallConvShape shape;
  small_conv::PixelSplit split;
  SmallConvStatsArgs args;  // scratch: [2][gridDim.x][K], Σ then Σ² of each block
  int taps_padded;
  int64_t tiles;
};

// Shared memory: the filters [64][kp + pad], two gathered tiles [128][kp + pad], the output
// tile [128][64 + pad], the chunk table and the statistics' cross-warp sums.
size_t forward_shared_bytes(int kp) {
  const size_t lda = static_cast<size_t>(kp + kPad);
  return 2 * (kTileCols * lda + 2 * kTileRows * lda + kTileRows * (kTileCols + kPad)) +
         sizeof(ChunkTap) * (kp / kChunk) + sizeof(float) * 4 * 2 * kTileCols;
}

// One tile's products: warp (wm, wn)'s 32 rows × 32 channels of the gathered windows `in`
// times the block's filters, in acc[m-tile][n-tile].
template <class T>
__device__ __forceinline__ void multiply_tile(const T* in, const T* filters, int kp, int lda, int lane, int wm, int wn,
                                              float (&acc)[2][4][4]) {
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;
  for (int kk = 0; kk < kp; kk += 16) {
    uint32_t a[2][4], b[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
      mma::ldmatrix_x4(a[mt], in + (wm * 32 + mt * 16 + 8 * ((lane >> 3) & 1) + (lane & 7)) * lda + kk +
                                  8 * (lane >> 4));
#pragma unroll
    for (int np = 0; np < 2; ++np)  // n-tiles 2np (b[np][0..1]) and 2np + 1 (b[np][2..3])
      mma::ldmatrix_x4(b[np], filters + (wn * 32 + np * 16 + 8 * (lane >> 4) + (lane & 7)) * lda + kk +
                                  8 * ((lane >> 3) & 1));
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
        mma::mma_16x8x16<T>(acc[mt][nt], a[mt], b[nt >> 1][(nt & 1) * 2], b[nt >> 1][(nt & 1) * 2 + 1]);
  }
}

// The epilogue of tile rows m0…: each value plus its bias, rounded to T, added to the
// thread's running sums (rows past the last pixel hold zeros, which add nothing unless a bias
// moved them) and staged in `tile_out` [128][ldc] for whole-row stores.
template <class T, bool kBias>
__device__ __forceinline__ void round_and_sum(const float (&acc)[2][4][4], const float (&bias)[4][2],
                                              float (&sum)[4][2], float (&sq)[4][2], T* tile_out, int ldc, int64_t m0,
                                              int64_t M, int lane, int wm, int wn) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = wm * 32 + mt * 16 + g + 8 * half;
      const bool live = m0 + r < M;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const unsigned packed =
            pack_rounded<T>(acc[mt][nt][2 * half] + bias[nt][0], acc[mt][nt][2 * half + 1] + bias[nt][1]);
        if (!kBias || live) {
          const float2 v = widen_pair<T>(packed);
          sum[nt][0] += v.x;
          sum[nt][1] += v.y;
          sq[nt][0] = __fmaf_rn(v.x, v.x, sq[nt][0]);
          sq[nt][1] = __fmaf_rn(v.y, v.y, sq[nt][1]);
        }
        *reinterpret_cast<uint32_t*>(tile_out + r * ldc + wn * 32 + nt * 8 + 2 * t) = packed;
      }
    }
}

// The block's sums of its 64 channels into the scratch's partials: the eight lanes of a column
// (same t) in a fixed butterfly, then the four row warps in order, through `cross`
// [4 row warps][2][64] in shared memory.
__device__ __forceinline__ void write_channel_sums(float (&sum)[4][2], float (&sq)[4][2], float* cross,
                                                   const ForwardParams& p, int64_t k0, int tid) {
  const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3, wm = warp & 3, wn = warp >> 2;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int offset = 4; offset < 32; offset *= 2) {
        sum[nt][j] += __shfl_xor_sync(0xffffffffu, sum[nt][j], offset);
        sq[nt][j] += __shfl_xor_sync(0xffffffffu, sq[nt][j], offset);
      }
  if (g == 0)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int col = wn * 32 + nt * 8 + 2 * t + j;
        cross[(wm * 2) * kTileCols + col] = sum[nt][j];
        cross[(wm * 2 + 1) * kTileCols + col] = sq[nt][j];
      }
  __syncthreads();
  if (tid < kTileCols) {
    float s = 0.f, s2 = 0.f;
    for (int i = 0; i < 4; ++i) {
      s += cross[(i * 2) * kTileCols + tid];
      s2 += cross[(i * 2 + 1) * kTileCols + tid];
    }
    float* partials = static_cast<float*>(p.args.scratch);
    partials[static_cast<int64_t>(blockIdx.x) * p.shape.K + k0 + tid] = s;
    partials[(static_cast<int64_t>(gridDim.x) + blockIdx.x) * p.shape.K + k0 + tid] = s2;
  }
}

// kBias: whether p.args.bias is set (without one the epilogue adds nothing and tests no row).
template <class T, bool kBias>
__global__ void __launch_bounds__(kBlock, 3) small_conv_stats_kernel(ForwardParams p) {
#if __CUDA_ARCH__ >= 800
  extern __shared__ __align__(16) unsigned char shared[];
  const SmallConvShape& sh = p.shape;
  const int kp = p.taps_padded, lda = kp + kPad, ldc = kTileCols + kPad, chunks = kp / kChunk;
  T* filters = reinterpret_cast<T*>(shared);
  T* tile_in = filters + kTileCols * lda;
  T* tile_out = tile_in + 2 * kTileRows * lda;
  auto* taps = reinterpret_cast<ChunkTap*>(tile_out + kTileRows * ldc);
  auto* cross = reinterpret_cast<float*>(taps + chunks);  // [4 row warps][2][64]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, t = lane & 3;
  const int wm = warp & 3, wn = warp >> 2;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * kTileCols, M = sh.rows();
  const int taps_total = static_cast<int>(sh.taps());

  const T* w = static_cast<const T*>(p.args.w);
  for (int i = tid; i < kTileCols * kp; i += kBlock) {
    const int n = i / kp, k = i - n * kp;
    filters[n * lda + k] = k < taps_total ? w[(k0 + n) * taps_total + k] : from_float<T>(0.f);
  }
  small_conv::make_chunk_taps(taps, sh, chunks);
  float bias[4][2], sum[4][2], sq[4][2];
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t col = k0 + wn * 32 + nt * 8 + 2 * t + j;
      bias[nt][j] = kBias ? load_as_float(p.args.bias.data, p.args.bias.type, col) : 0.f;
      sum[nt][j] = sq[nt][j] = 0.f;
    }
  __syncthreads();

  // The tile row this thread gathers, and its chunks tid / 128, + 2, + 4, …
  const int row = tid & (kTileRows - 1), first_chunk = tid >> 7;
  auto gather = [&](int64_t tile, T* into) {
    if (tile < p.tiles) {
      const small_conv::WindowCorner corner = small_conv::window_corner(sh, p.split, tile * kTileRows + row);
      small_conv::gather_window_async(into + row * lda, p.args.x, sh, corner, taps, first_chunk, 2, chunks);
    }
    async_copy::commit();
  };
  T* y = static_cast<T*>(p.args.y);
  // Two gathered tiles: the next tile's windows are in flight while this one is multiplied,
  // rounded and stored. Buffer buf ^ 1 was last read by the tile before, whose matrix products
  // all warps finished before the barrier ahead of its stores.
  gather(blockIdx.x, tile_in);
  int buf = 0;
  for (int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x, buf ^= 1) {
    const int64_t m0 = tile * kTileRows;
    const T* in = tile_in + buf * kTileRows * lda;
    gather(tile + gridDim.x, tile_in + (buf ^ 1) * kTileRows * lda);
    async_copy::wait<1>();
    __syncthreads();
    float acc[2][4][4];
    multiply_tile<T>(in, filters, kp, lda, lane, wm, wn, acc);
    round_and_sum<T, kBias>(acc, bias, sum, sq, tile_out, ldc, m0, M, lane, wm, wn);
    __syncthreads();
    for (int i = tid; i < kTileRows * kTileCols / 8; i += kBlock) {
      const int r = i >> 3, c8 = i & 7;
      if (m0 + r < M)
        *reinterpret_cast<uint4*>(y + (m0 + r) * sh.K + k0 + 8 * c8) =
            *reinterpret_cast<const uint4*>(tile_out + r * ldc + 8 * c8);
    }
  }
  write_channel_sums(sum, sq, cross, p, k0, tid);
#endif
}

// The persistent grid: as many blocks as stay resident, never more than there are tiles. It
// depends only on the shape, the bias's presence and the GPU, so the partial sums add in the
// same order every run.
template <class T, bool kBias>
unsigned forward_grid(const SmallConvShape& s, int sm_count) {
  const size_t shared = forward_shared_bytes(static_cast<int>(s.taps_padded()));
  static const bool raised = [&] {
    return cudaFuncSetAttribute(small_conv_stats_kernel<T, kBias>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(forward_shared_bytes(kMostTaps))) == cudaSuccess;
  }();
  (void)raised;
  int resident = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, small_conv_stats_kernel<T, kBias>, kBlock, shared) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    resident = 1;
  }
  const int64_t tiles = small_conv::tile_count(s);
  return static_cast<unsigned>(std::clamp<int64_t>(static_cast<int64_t>(std::max(resident, 1)) * sm_count, 1, tiles));
}

// Launches the forward on its grid (capped by the scratch's room) and returns the block count.
template <class T, bool kBias>
unsigned launch_forward(const ForwardParams& p, cudaStream_t stream) {
  const SmallConvShape& s = p.shape;
  const int sm_count = p.args.sm_count;
  const auto room = static_cast<unsigned>(small_conv_stats_scratch_bytes(s, sm_count) / (2 * s.K * sizeof(float)));
  const unsigned blocks = std::min<unsigned>(forward_grid<T, kBias>(s, sm_count), room);
  const dim3 grid(blocks, static_cast<unsigned>(s.K / kTileCols));
  small_conv_stats_kernel<T, kBias><<<grid, kBlock, forward_shared_bytes(p.taps_padded), stream>>>(p);
  return blocks;
}

template <class T>
unsigned launch_forward(const ForwardParams& p, cudaStream_t stream) {
  return p.args.bias.data ? launch_forward<T, true>(p, stream) : launch_forward<T, false>(p, stream);
}

}  // namespace

std::string small_conv_refusal(const SmallConvShape& s, ElemType t, int64_t dilation_h, int64_t dilation_w,
                               int64_t groups, SmallConvKernel kernel) {
  if (kernel == SmallConvKernel::weight_backward) {
    ops::CbrWeightBackwardForm f;
    f.C = s.C;
    f.K = s.K;
    f.R = s.R;
    f.S = s.S;
    f.groups = groups;
    f.dilation_h = dilation_h;
    f.dilation_w = dilation_w;
    f.dtype = t == ElemType::f16 ? DType::f16 : t == ElemType::bf16 ? DType::bf16 : DType::f32;
    std::string why = ops::cbr_weight_backward_refusal(f);
    if (!why.empty()) return why;
  } else {
    if (t == ElemType::f32) return "it computes on the tensor cores in f16 or bf16, not f32";
    if (groups != 1) return "it has no grouped form";
    if (dilation_h != 1 || dilation_w != 1) return "it has no dilated form";
    if (s.C % kChunk != 0) return "it reads input channels in fours (C = " + std::to_string(s.C) + ")";
    if (s.taps() > kMostTaps)
      return "its reduction R·S·C = " + std::to_string(s.taps()) + " exceeds the " + std::to_string(kMostTaps) +
             " it holds on chip";
    if (s.K % kTileCols != 0) return "it needs a multiple of 64 output channels (K = " + std::to_string(s.K) + ")";
  }
  if (s.rows() < 1) return "the output is empty";
  if (s.rows() >= (int64_t{1} << 31))
    return "it numbers output pixels in 32 bits (N·P·Q = " + std::to_string(s.rows()) + ")";
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "no GPU answered";
  }
  if (major < 8) return "it needs a GPU of compute capability 8.0 or newer (mma.sync)";
  return "";
}

size_t small_conv_stats_scratch_bytes(const SmallConvShape& s, int sm_count) {
  const int64_t tiles = small_conv::tile_count(s);
  const int64_t most_blocks = std::min<int64_t>(tiles, static_cast<int64_t>(sm_count) * 8);
  return static_cast<size_t>(2 * most_blocks * s.K) * sizeof(float);
}

void launch_small_conv_stats(const SmallConvShape& s, const SmallConvStatsArgs& a, cudaStream_t stream) {
  ForwardParams p;
  p.shape = s;
  p.split = small_conv::PixelSplit(s);
  p.args = a;
  p.taps_padded = static_cast<int>(s.taps_padded());
  p.tiles = small_conv::tile_count(s);
  const unsigned blocks =
      a.io == ElemType::bf16 ? launch_forward<__nv_bfloat16>(p, stream) : launch_forward<__half>(p, stream);
  check_launch("small_conv_stats_kernel");
  launch_combine_channel_partials(static_cast<float*>(a.scratch), blocks, s.K, a.sum, a.sq_sum, stream);
}

}  // namespace trident::cuda::device
