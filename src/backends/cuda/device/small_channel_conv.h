// Host launchers of trident's own convolutions for layers with few input channels — a network's
// first layer, whose image is padded to 4 channels (VGG: 4→64 channels at 224², ResNet's 7×7
// stem). cuDNN runs those far below memory bandwidth (its kernels tile the reduction over
// R·S·C = 36 as if it were wide), yet they move the most bytes of the network: one output
// of 64 channels per input pixel. Both kernels are implicit GEMMs on the tensor cores whose
// whole reduction (R·S·C, padded to a multiple of 16) fits in shared memory:
//   - the forward (small_channel_conv.cu): conv_out = conv2d(x, w) [+ b] and its per-channel
//     Σ, Σ² in one pass, for cbr/conv_bn_stats (statistics of the stored, rounded values);
//   - the weight backward (cbr_weight_backward.cu): for a layer whose input takes no gradient,
//     the batchnorm-relu backward and the weight gradient in one pass over dy and conv_out,
//     without writing dconv (ops/cbr_weight_backward.cpp gives the algebra).
// Both reduce deterministically: per-block partial sums in a fixed grid, added in a fixed order.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backends/cuda/device/batchnorm.h"
#include "backends/cuda/device/launch.h"

namespace trident::cuda::device {

// x [N,H,W,C] convolved by w [K,R,S,C] (groups 1, dilation 1) into y [N,P,Q,K], NHWC.
struct SmallConvShape {
  int64_t N = 0, H = 0, W = 0, C = 0, K = 0, R = 0, S = 0, P = 0, Q = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  __host__ __device__ int64_t rows() const { return N * P * Q; }  // output pixels, the GEMM's M
  __host__ __device__ int64_t taps() const { return R * S * C; }  // the forward's reduction
  __host__ __device__ int64_t taps_padded() const { return (taps() + 15) / 16 * 16; }
};

// Which of the two kernels a shape is asked of: their limits differ.
enum class SmallConvKernel { forward, weight_backward };

// Empty when the kernel takes this convolution, else the reason it does not, in words (for
// `trident explain` and the fusion report). `dilation` and `groups` as the node has them.
std::string small_conv_refusal(const SmallConvShape& s, ElemType t, int64_t dilation_h, int64_t dilation_w,
                               int64_t groups, SmallConvKernel kernel);

// ---- forward -----------------------------------------------------------------------------
// Bytes of scratch the forward's partial sums need on a GPU of `sm_count` multiprocessors.
size_t small_conv_stats_scratch_bytes(const SmallConvShape& s, int sm_count);
// y = conv2d(x, w) + bias (bias null: none; f32 or the io dtype), rounded to the io dtype,
// and sum[k] = Σ y, sq_sum[k] = Σ y² over the N·P·Q rows of the rounded values (f32 results
// of f64 sums of per-block f32 partials). x, w and y must be 8- and 16-byte aligned.
struct SmallConvStatsArgs {
  ElemType io = ElemType::f16;
  const void* x = nullptr;
  const void* w = nullptr;
  ChannelTensor bias;  // data null: no bias
  void* y = nullptr;
  float* sum = nullptr;
  float* sq_sum = nullptr;
  void* scratch = nullptr;  // small_conv_stats_scratch_bytes
  int sm_count = 132;
};
void launch_small_conv_stats(const SmallConvShape& s, const SmallConvStatsArgs& a, cudaStream_t stream);

// ---- weight backward ---------------------------------------------------------------------
// For cbr_weight_backward: with g = dy masked by the relu (MaskSource as the batchnorm
// backward reads it: the relu output y, its packed bits, or the layer's affine) over the
// convolution output conv_out [N,P,Q,K]:
//   dbeta = Σ g, dgamma = invstd·Σ g·(conv_out − mean)          (the batchnorm backward's)
//   dw[k, r, s, c] = Σ dconv[n,p,q,k]·x[n, p·sh − ph + r, q·sw − pw + s, c]
// with dconv = γ·invstd·(g − dbeta/M − (conv_out − mean)·invstd·dgamma/M), the gradient the
// batchnorm backward would have written — never formed: dw is γ·invstd·(G1 − dbeta/M·G3 −
// invstd·dgamma/M·G2) of the sums G1 = Σ g·x, G2 = Σ (conv_out − mean)·x and G3 = Σ x that
// one pass gathers.
struct CbrWeightBackwardArgs {
  ElemType io = ElemType::f16;
  const void* x = nullptr;         // the convolution's input [N,H,W,C]
  const void* dy = nullptr;        // the relu output's gradient [N,P,Q,K]
  const void* conv_out = nullptr;  // [N,P,Q,K]
  const void* relu_output = nullptr;  // the mask: y,
  const void* relu_bits = nullptr;    // or its packed bits (row_bytes a row),
  int64_t relu_bits_row_bytes = 0;
  const float* relu_affine = nullptr;  // or the affine [2, K] that recomputes y from conv_out
  ChannelTensor gamma, saved_mean, saved_invstd;  // [K]
  void* dw = nullptr;                             // [K,R,S,C]
  ElemType dw_type = ElemType::f32;
  ChannelTensor dgamma, dbeta;
  void* scratch = nullptr;  // cbr_weight_backward_scratch_bytes
  int sm_count = 132;
};
size_t cbr_weight_backward_scratch_bytes(const SmallConvShape& s, int sm_count);
// Enqueues the pass, the reduction of its partial sums and the final combination on `stream`.
// With over_ranks (sync-BN) Σg and Σg·(conv_out − mean) are summed over the ranks before the
// combination (dgamma and dbeta stay this rank's, as the batchnorm backward keeps them).
void launch_cbr_weight_backward(const SmallConvShape& s, const CbrWeightBackwardArgs& a, cudaStream_t stream,
                                const RankSum* over_ranks = nullptr);

}  // namespace trident::cuda::device
