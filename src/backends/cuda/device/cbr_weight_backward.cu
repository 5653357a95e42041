// The weight backward of trident's small-channel convolution (small_channel_conv.h): for a
// layer whose input takes no gradient, its batchnorm-relu backward and its weight gradient in
// one pass over dy and conv_out, instead of the batchnorm backward's two passes, the dconv it
// writes and the weight gradient's pass over it.
//
// The pass is a split-K GEMM on the tensor cores over tiles of 128 output pixels. Per tile the
// block copies dy and conv_out as [pixel][dy | conv_out] and each pixel's window of x into
// shared memory, one tile ahead (asynchronous copies, two stages); a thread then masks its own
// vectors of dy (g) and centres conv_out on the saved mean, in place. Eight warps then multiply
// the tile's 128 "channel rows" (64 of g, 64 centred) with the 16·n gathered values,
// accumulating G1 = Σ g·x and G2 = Σ (conv_out − mean)·x across the block's tiles in registers;
// the same walk sums Σg, Σg·(conv_out − mean) (exactly as the batchnorm backward's statistics),
// and G3 = Σ x as the product of an all-ones matrix with the windows (one more mma a k-step for
// each of the first NT warps). Each block writes its partial sums; a second kernel adds them per
// value in a fixed order (f64) and a third combines them into dgamma, dbeta and dw. On an H200
// the pass is bound by shared-memory traffic (every warp reads the whole gathered tile), not by
// the device memory it streams.
#include <algorithm>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/async_copy.cuh"
#include "backends/cuda/device/batchnorm_detail.cuh"
#include "backends/cuda/device/mma.cuh"
#include "backends/cuda/device/small_channel_conv.cuh"
#include "ops/cbr_weight_backward.h"

namespace trident::cuda::device {

namespace {

static_assert(ops::kCbrWeightBackwardChannels == 64 && ops::kCbrWeightBackwardMostTaps <= 64,
              "the kernel's warps own 16 of the 128 GEMM rows each; the reduction takes at most 8 n-tiles");

using batchnorm_detail::MaskSource;
using batchnorm_detail::VectorAffine;
using small_conv::ChunkTap;
using small_conv::kChunk;
using small_conv::kPad;
using small_conv::kTileRows;  // the GEMM's reduction step

constexpr int kChannels = static_cast<int>(ops::kCbrWeightBackwardChannels);  // K: with g and the
                                                                            // centred conv_out, 128 GEMM rows
constexpr int kBlock = 256;     // 8 warps, one 16-row slice of the 128 each
constexpr int kWarps = kBlock / 32;

// One block's partial sums, in floats: G1 then G2 ([128][kp]: rows 0-63 g's, 64-127 the
// centred conv_out's), then Σg and Σg·(conv_out − mean) [2][64], then G3 [kp].
__host__ __device__ int64_t record_floats(int kp) { return 2 * kChannels * kp + 2 * kChannels + kp; }
__host__ __device__ int64_t stats_at(int kp) { return 2 * kChannels * kp; }
__host__ __device__ int64_t g3_at(int kp) { return 2 * kChannels * kp + 2 * kChannels; }

struct BackwardParams {
  SmallConvShape shape;
  small_conv::PixelSplit split;
  CbrWeightBackwardArgs args;  // scratch starts with the partials: [gridDim.x][record_floats]
  int64_t tiles;
};

// Shared memory: two stages, each [128 pixels][dy | conv_out] (becoming [g | conv_out − mean]
// in place) and the gathered windows [128 pixels][kp], then the chunk table. The cross-warp
// statistics reuse the first stage once the walk is over.
constexpr int kStageRowElems = 2 * kChannels + kPad;
template <int NT>
constexpr size_t stage_elems() {
  return static_cast<size_t>(kTileRows) * (kStageRowElems + NT * 8 + kPad);
}
template <int NT>
size_t backward_shared_bytes() {
  constexpr int kp = NT * 8;
  return 2 * 2 * stage_elems<NT>() + sizeof(ChunkTap) * (kp / kChunk);
}

// 1.0 in both halves of an operand register: the A fragment of an all-ones matrix.
template <class T>
constexpr uint32_t kOnes = std::is_same_v<T, __half> ? 0x3C003C00u : 0x3F803F80u;

// Tile `tile`'s copies into stage `stage` (its [pixel][dy | conv_out] rows, then its gathered
// windows): this thread's eight channels c0… of dy and conv_out in four rows (zeros past the
// last pixel), and its chunks of one pixel's window; one commit group whether or not the tile
// exists, so the waits count alike.
template <class T, int NT>
__device__ __forceinline__ void load_tile(const BackwardParams& p, const ChunkTap* taps, T* stage, int64_t tile,
                                          int tid, int c0) {
  constexpr int kp = NT * 8, chunks = kp / kChunk;
  constexpr int ldg = kStageRowElems, ldx = kp + kPad;
  if (tile < p.tiles) {
    const int64_t m0 = tile * kTileRows, M = p.shape.rows();
    const T* dy = static_cast<const T*>(p.args.dy);
    const T* conv_out = static_cast<const T*>(p.args.conv_out);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = (tid >> 3) + 32 * i;
      const bool live = m0 + r < M;
      const int64_t at = live ? (m0 + r) * kChannels + c0 : 0;
      async_copy::copy<16>(stage + r * ldg + c0, dy + at, live);
      async_copy::copy<16>(stage + r * ldg + kChannels + c0, conv_out + at, live);
    }
    const int row = tid & (kTileRows - 1);  // the tile row this thread gathers x for
    const small_conv::WindowCorner corner = small_conv::window_corner(p.shape, p.split, m0 + row);
    T* into = stage + kTileRows * ldg + row * ldx;
#pragma unroll
    for (int i = 0; i < chunks / 2; ++i) {  // chunks tid / 128, + 2, + 4, …
      const int j = (tid >> 7) + 2 * i;
      small_conv::gather_chunk_async(into + j * kChunk, p.args.x, p.shape, corner, taps[j]);
    }
  }
  async_copy::commit();
}

// In place on a loaded tile's rows: dy becomes g (masked by the relu), conv_out becomes
// conv_out − mean, and g's sums gather into gsum and centred_sum. The thread transforms the very
// vectors it copied, so no other thread's copies are read here.
template <class T>
__device__ __forceinline__ void mask_and_centre(T* grad, const MaskSource<T>& mask, const VectorAffine<T>& affine,
                                                const float (&mean)[8], float (&gsum)[8], float (&centred_sum)[8],
                                                int64_t m0, int64_t M, int tid, int c0) {
  constexpr int ldg = kStageRowElems;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = (tid >> 3) + 32 * i;
    const int64_t m = m0 + r;
    const bool live = m < M;
    uint4 yv = make_uint4(0u, 0u, 0u, 0u);
    unsigned bits = 0u;
    if (live && mask.y) yv = batchnorm_detail::load_vector(mask.y + m * kChannels + c0);
    if (live && mask.bits) bits = mask.byte_from(m, c0);
    float d[8], x[8], centred[8];
    batchnorm_detail::to_floats<T>(*reinterpret_cast<const uint4*>(grad + r * ldg + c0), d);
    batchnorm_detail::to_floats<T>(*reinterpret_cast<const uint4*>(grad + r * ldg + kChannels + c0), x);
    batchnorm_detail::mask_gradient<T>(mask, yv, bits, x, affine, d);
    // A row past the last pixel keeps −mean here: its dy is zero, and so is its window of x.
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      centred[j] = __fsub_rn(x[j], mean[j]);
      gsum[j] += d[j];
      centred_sum[j] = __fmaf_rn(d[j], centred[j], centred_sum[j]);
    }
    batchnorm_detail::store_vector(grad + r * ldg + c0, batchnorm_detail::from_floats<T>(d));
    batchnorm_detail::store_vector(grad + r * ldg + kChannels + c0, batchnorm_detail::from_floats<T>(centred));
  }
}

// Warp `warp`'s products over one tile: GEMM rows 16w … 16w + 15 (A = the tile's columns,
// transposed by ldmatrix) into acc, and with WithOnes (warps below NT) G3's n-tile w into ones,
// the product of an all-ones A with the gathered windows.
template <class T, int NT, bool WithOnes>
__device__ __forceinline__ void multiply_tile(const T* grad, const T* gathered, float (&acc)[NT][4], float (&ones)[4],
                                              int lane, int warp) {
  constexpr int ldg = kStageRowElems, ldx = NT * 8 + kPad;
  const uint32_t all_ones[4] = {kOnes<T>, kOnes<T>, kOnes<T>, kOnes<T>};
#pragma unroll
  for (int k0 = 0; k0 < kTileRows; k0 += 16) {
    const int k_row = k0 + 8 * ((lane >> 3) & 1) + (lane & 7);
    uint32_t a[4];
    mma::ldmatrix_x4_trans(a, grad + (k0 + 8 * (lane >> 4) + (lane & 7)) * ldg + 16 * warp + 8 * ((lane >> 3) & 1));
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      uint32_t bf[4];
      mma::ldmatrix_x4_trans(bf, gathered + k_row * ldx + 16 * np + 8 * (lane >> 4));
      mma::mma_16x8x16<T>(acc[2 * np], a, bf[0], bf[1]);
      mma::mma_16x8x16<T>(acc[2 * np + 1], a, bf[2], bf[3]);
    }
    if constexpr (WithOnes) {
      uint32_t bo[2];
      mma::ldmatrix_x2_trans(bo, gathered + k_row * ldx + 8 * warp);
      mma::mma_16x8x16<T>(ones, all_ones, bo[0], bo[1]);
    }
  }
}

// The block's partial sums into its record: the warps' GEMM rows, G3 (every row of the
// all-ones product holds it: row 0 of n-tile `warp`), and Σg, Σg·(conv_out − mean) — the four
// lanes of a warp that share channels (xor 8, 16), then the eight warps in order, through
// `cross_stats` [8 warps][2][64] in shared memory.
template <int NT>
__device__ __forceinline__ void write_partials(float* record, const float (&acc)[NT][4], const float (&ones)[4],
                                               float (&gsum)[8], float (&centred_sum)[8], float* cross_stats, int tid,
                                               int c0) {
  constexpr int kp = NT * 8;
  const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int r = 16 * warp + g, col = nt * 8 + 2 * t;
    record[r * kp + col] = acc[nt][0];
    record[r * kp + col + 1] = acc[nt][1];
    record[(r + 8) * kp + col] = acc[nt][2];
    record[(r + 8) * kp + col + 1] = acc[nt][3];
  }
  if (warp < NT && g == 0) {
    record[g3_at(kp) + warp * 8 + 2 * t] = ones[0];
    record[g3_at(kp) + warp * 8 + 2 * t + 1] = ones[1];
  }
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int offset = 8; offset < 32; offset *= 2) {
      gsum[j] += __shfl_xor_sync(0xffffffffu, gsum[j], offset);
      centred_sum[j] += __shfl_xor_sync(0xffffffffu, centred_sum[j], offset);
    }
  if (lane < 8)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      cross_stats[(warp * 2) * kChannels + c0 + j] = gsum[j];
      cross_stats[(warp * 2 + 1) * kChannels + c0 + j] = centred_sum[j];
    }
  __syncthreads();
  if (tid < 2 * kChannels) {
    const int which = tid / kChannels, ch = tid % kChannels;
    float s = 0.f;
    for (int w = 0; w < kWarps; ++w) s += cross_stats[(w * 2 + which) * kChannels + ch];
    record[stats_at(kp) + tid] = s;
  }
}

// NT: n-tiles of 8 in the padded reduction (kp = 8·NT ∈ {16, 32, 48, 64}). Two blocks stay
// resident per multiprocessor. Each block walks its tiles with two stages: while tile i is
// masked, centred and multiplied, tile i + 1's dy, conv_out and windows are in flight by
// asynchronous copies, so the loads never wait behind the matrix products.
template <class T, int NT>
__global__ void __launch_bounds__(kBlock, 2) cbr_weight_backward_kernel(BackwardParams p) {
#if __CUDA_ARCH__ >= 800
  constexpr int kp = NT * 8, chunks = kp / kChunk;
  extern __shared__ __align__(16) unsigned char shared[];
  T* stages = reinterpret_cast<T*>(shared);  // stage b: grad rows, then gathered rows
  auto* taps = reinterpret_cast<ChunkTap*>(stages + 2 * stage_elems<NT>());
  auto stage_of = [&](int b) { return stages + b * stage_elems<NT>(); };

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t M = p.shape.rows();
  const int c0 = 8 * (tid & 7);  // this thread's eight channels of dy and conv_out
  const CbrWeightBackwardArgs& args = p.args;
  const MaskSource<T> mask{static_cast<const T*>(args.relu_output), static_cast<const unsigned char*>(args.relu_bits),
                           args.relu_bits_row_bytes, args.relu_affine, kChannels, 0.f};
  VectorAffine<T> affine;
  affine.load(mask, c0);
  float mean[8], gsum[8], centred_sum[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    mean[j] = load_as_float(args.saved_mean.data, args.saved_mean.type, c0 + j);
    gsum[j] = centred_sum[j] = 0.f;
  }
  // acc: this warp's 16 GEMM rows × kp; ones: G3's n-tile `warp` (warps below NT).
  float acc[NT][4], ones[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
  small_conv::make_chunk_taps(taps, p.shape, chunks);
  __syncthreads();

  load_tile<T, NT>(p, taps, stage_of(0), blockIdx.x, tid, c0);
  int b = 0;
  for (int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x, b ^= 1) {
    // Stage b ^ 1 was last read by the tile before's matrix products, which every warp
    // finished before the barrier that ends its iteration.
    load_tile<T, NT>(p, taps, stage_of(b ^ 1), tile + gridDim.x, tid, c0);
    async_copy::wait<1>();
    __syncthreads();
    T* grad = stage_of(b);
    mask_and_centre<T>(grad, mask, affine, mean, gsum, centred_sum, tile * kTileRows, M, tid, c0);
    __syncthreads();
    const T* gathered = grad + kTileRows * kStageRowElems;
    if (warp < NT) multiply_tile<T, NT, true>(grad, gathered, acc, ones, lane, warp);
    else multiply_tile<T, NT, false>(grad, gathered, acc, ones, lane, warp);
    __syncthreads();
  }
  async_copy::wait<0>();  // the last, empty group
  float* record = static_cast<float*>(args.scratch) + static_cast<int64_t>(blockIdx.x) * record_floats(kp);
  write_partials<NT>(record, acc, ones, gsum, centred_sum, reinterpret_cast<float*>(stages), tid, c0);
#endif
}

// totals[v] = Σ_b partials[b·record + v], in block order, in f64.
__global__ void add_partials_kernel(const float* __restrict__ partials, int64_t blocks, int64_t record,
                                    double* __restrict__ totals) {
  const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= record) return;
  double s = 0.0;
  for (int64_t b = 0; b < blocks; ++b) s += static_cast<double>(partials[b * record + v]);
  totals[v] = s;
}

struct CombineParams {
  const double* totals;  // add_partials_kernel's
  const double* global;  // Σg, Σg·(conv_out − mean) over the ranks (sync-BN), or null
  int64_t rows;          // M over every rank the statistics span
  int kp, taps;
  CbrWeightBackwardArgs args;  // gamma, saved_invstd in; dgamma, dbeta, dw out
};

// dw[k, i] = γ·invstd·(G1 − Σg/M·G3 − invstd·dγ/M·G2) for i < R·S·C; dgamma and dbeta (the
// rank's own sums, as the batchnorm backward writes them) by the threads of i = 0.
__global__ void combine_kernel(CombineParams c) {
  const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= static_cast<int64_t>(kChannels) * c.taps) return;
  const int k = static_cast<int>(v / c.taps), i = static_cast<int>(v % c.taps);
  const double* stats = c.totals + stats_at(c.kp);
  const CbrWeightBackwardArgs& a = c.args;
  const double invstd = load_as_float(a.saved_invstd.data, a.saved_invstd.type, k);
  if (i == 0) {
    store_from_float(a.dgamma.data, a.dgamma.type, k, static_cast<float>(stats[kChannels + k] * invstd));
    store_from_float(a.dbeta.data, a.dbeta.type, k, static_cast<float>(stats[k]));
  }
  const double dbeta = c.global ? c.global[k] : stats[k];
  const double dgamma = (c.global ? c.global[kChannels + k] : stats[kChannels + k]) * invstd;
  const double M = static_cast<double>(c.rows);
  const double g1 = c.totals[k * c.kp + i], g2 = c.totals[(kChannels + k) * c.kp + i];
  const double g3 = c.totals[g3_at(c.kp) + i];
  const double scale = static_cast<double>(load_as_float(a.gamma.data, a.gamma.type, k)) * invstd;
  const double dw = scale * (g1 - dbeta / M * g3 - invstd * dgamma / M * g2);
  store_from_float(a.dw, a.dw_type, v, static_cast<float>(dw));
}

template <class T, int NT>
void launch_pass(const BackwardParams& p, unsigned blocks, cudaStream_t stream) {
  // resident_blocks() raised the kernel's shared-memory limit before the first launch.
  cbr_weight_backward_kernel<T, NT><<<blocks, kBlock, backward_shared_bytes<NT>(), stream>>>(p);
}

template <class T, int NT>
int resident_blocks() {
  static const int cached = [] {
    const size_t shared = backward_shared_bytes<NT>();
    cudaFuncSetAttribute(cbr_weight_backward_kernel<T, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(shared));
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, cbr_weight_backward_kernel<T, NT>, kBlock, shared) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      n = 1;
    }
    return std::max(n, 1);
  }();
  return cached;
}

// Calls fn(T{}, std::integral_constant<int, NT>{}) for the io dtype and the padded reduction.
template <class Fn>
void dispatch_backward(ElemType io, int kp, Fn&& fn) {
  auto with_type = [&](auto tag) {
    switch (kp) {
      case 16: fn(tag, std::integral_constant<int, 2>{}); return;
      case 32: fn(tag, std::integral_constant<int, 4>{}); return;
      case 48: fn(tag, std::integral_constant<int, 6>{}); return;
      default: fn(tag, std::integral_constant<int, 8>{}); return;
    }
  };
  if (io == ElemType::bf16) with_type(__nv_bfloat16{});
  else with_type(__half{});
}

int64_t backward_blocks(const SmallConvShape& s, int sm_count, int resident) {
  return std::clamp<int64_t>(static_cast<int64_t>(resident) * sm_count, 1, small_conv::tile_count(s));
}

// The scratch: the partial records of at most 4 resident blocks per multiprocessor (rounded up
// to 256 bytes), then the f64 totals of one record and the [2][64] f64 sums over the ranks.
size_t partials_bytes(const SmallConvShape& s, int sm_count) {
  const int64_t floats = backward_blocks(s, sm_count, 4) * record_floats(static_cast<int>(s.taps_padded()));
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  return (bytes + 255) / 256 * 256;
}

}  // namespace

size_t cbr_weight_backward_scratch_bytes(const SmallConvShape& s, int sm_count) {
  const int kp = static_cast<int>(s.taps_padded());
  return partials_bytes(s, sm_count) + static_cast<size_t>(record_floats(kp) + 2 * kChannels) * sizeof(double);
}

void launch_cbr_weight_backward(const SmallConvShape& s, const CbrWeightBackwardArgs& a, cudaStream_t stream,
                                const RankSum* over_ranks) {
  const int kp = static_cast<int>(s.taps_padded());
  BackwardParams p;
  p.shape = s;
  p.split = small_conv::PixelSplit(s);
  p.args = a;
  p.tiles = small_conv::tile_count(s);
  int64_t blocks = 0;
  dispatch_backward(a.io, kp, [&](auto tag, auto nt) {
    using T = decltype(tag);
    constexpr int NT = decltype(nt)::value;
    const int resident = std::min(resident_blocks<T, NT>(), 4);
    blocks = backward_blocks(s, a.sm_count, resident);
    launch_pass<T, NT>(p, static_cast<unsigned>(blocks), stream);
  });
  check_launch("cbr_weight_backward_kernel");

  const int64_t record = record_floats(kp);
  auto* totals = reinterpret_cast<double*>(static_cast<char*>(a.scratch) + partials_bytes(s, a.sm_count));
  double* global = totals + record;
  add_partials_kernel<<<static_cast<unsigned>((record + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      static_cast<const float*>(a.scratch), blocks, record, totals);
  check_launch("cbr_weight_backward add_partials_kernel");
  if (over_ranks) over_ranks->sum(totals + stats_at(kp), global, 2 * kChannels, stream);

  CombineParams c;
  c.totals = totals;
  c.global = over_ranks ? global : nullptr;
  c.rows = s.rows() * (over_ranks ? over_ranks->ranks : 1);
  c.kp = kp;
  c.taps = static_cast<int>(s.taps());
  c.args = a;
  const int64_t outputs = kChannels * s.taps();
  combine_kernel<<<static_cast<unsigned>((outputs + kThreads - 1) / kThreads), kThreads, 0, stream>>>(c);
  check_launch("cbr_weight_backward combine_kernel");
}

}  // namespace trident::cuda::device
