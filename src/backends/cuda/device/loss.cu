// Softmax cross-entropy kernels of the cuda backend: one block per row (grid-stride over
// rows) for the row's max, Σexp and loss or gradient; one block for the batch mean. Block
// reductions run in a fixed tree order, so results are the same bits on every run.
#include <cmath>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/loss.h"

namespace trident::cuda::device {

namespace {

// max_k x[k] and Σ_k exp(x[k] − max) of one row, known to every thread of the block.
template <class T>
__device__ void row_softmax_terms(const T* row, int64_t K, float* scratch, float& mx, float& sum) {
  float m = -INFINITY;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) m = fmaxf(m, to_float(row[k]));
  mx = block_max(m, scratch);
  float s = 0.f;
  for (int64_t k = threadIdx.x; k < K; k += blockDim.x) s += expf(to_float(row[k]) - mx);
  sum = block_sum(s, scratch);
}

__device__ __forceinline__ bool label_ok(int32_t label, int64_t K) { return label >= 0 && label < K; }

template <class T>
__global__ void row_loss_kernel(const T* __restrict__ logits, const int32_t* __restrict__ labels, int64_t N, int64_t K,
                                float smoothing, double* __restrict__ row_loss) {
  __shared__ float scratch[kThreads];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* row = logits + n * K;
    float mx, sum;
    row_softmax_terms(row, K, scratch, mx, sum);
    float total = 0.f;  // Σ_k x_k, for the smoothed target's ε/K share
    if (smoothing > 0.f) {
      float s = 0.f;
      for (int64_t k = threadIdx.x; k < K; k += blockDim.x) s += to_float(row[k]);
      total = block_sum(s, scratch);
    }
    if (threadIdx.x == 0) {
      const int32_t label = labels[n];
      const double eps = smoothing;
      row_loss[n] = label_ok(label, K) ? static_cast<double>(mx) + log(static_cast<double>(sum)) -
                                             (1.0 - eps) * static_cast<double>(to_float(row[label])) -
                                             eps * static_cast<double>(total) / static_cast<double>(K)
                                       : static_cast<double>(NAN);
    }
  }
}

__global__ void batch_mean_kernel(const double* __restrict__ row_loss, int64_t N, void* loss, ElemType loss_type) {
  __shared__ double scratch[kThreads];
  double s = 0.0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) s += row_loss[n];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) store_from_float(loss, loss_type, 0, static_cast<float>(N > 0 ? s / static_cast<double>(N) : 0.0));
}

template <class T>
__global__ void backward_kernel(const T* __restrict__ logits, const int32_t* __restrict__ labels, int64_t N, int64_t K,
                                float smoothing, const void* dloss, ElemType dloss_type, T* __restrict__ dlogits) {
  __shared__ float scratch[kThreads];
  const float scale = load_as_float(dloss, dloss_type, 0) / static_cast<float>(N);
  const float spread = smoothing / static_cast<float>(K);
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* row = logits + n * K;
    float mx, sum;
    row_softmax_terms(row, K, scratch, mx, sum);
    const int32_t label = labels[n];
    const bool ok = label_ok(label, K);
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
      const float p = expf(to_float(row[k]) - mx) / sum - (k == label ? 1.f - smoothing : 0.f) - spread;
      dlogits[n * K + k] = from_float<T>(ok ? p * scale : NAN);
    }
  }
}

unsigned row_blocks(int64_t N) { return static_cast<unsigned>(N < kMaxBlocks ? N : kMaxBlocks); }

}  // namespace

size_t softmax_cross_entropy_workspace(int64_t N) { return sizeof(double) * static_cast<size_t>(N > 0 ? N : 1); }

void launch_softmax_cross_entropy(ElemType logits_type, const void* logits, const int32_t* labels, int64_t N, int64_t K,
                                  float smoothing, void* loss, ElemType loss_type, void* workspace, cudaStream_t stream) {
  double* row_loss = static_cast<double*>(workspace);
  if (N > 0) {
    dispatch_elem(logits_type, [&](auto tag) {
      using T = decltype(tag);
      row_loss_kernel<T><<<row_blocks(N), kThreads, 0, stream>>>(static_cast<const T*>(logits), labels, N, K, smoothing,
                                                                  row_loss);
    });
    check_launch("softmax_cross_entropy row_loss_kernel");
  }
  batch_mean_kernel<<<1, kThreads, 0, stream>>>(row_loss, N, loss, loss_type);
  check_launch("softmax_cross_entropy batch_mean_kernel");
}

void launch_softmax_cross_entropy_backward(ElemType logits_type, const void* logits, const int32_t* labels, int64_t N,
                                           int64_t K, float smoothing, const void* dloss, ElemType dloss_type,
                                           void* dlogits, cudaStream_t stream) {
  if (N <= 0 || K <= 0) return;
  dispatch_elem(logits_type, [&](auto tag) {
    using T = decltype(tag);
    backward_kernel<T><<<row_blocks(N), kThreads, 0, stream>>>(static_cast<const T*>(logits), labels, N, K, smoothing,
                                                               dloss, dloss_type, static_cast<T*>(dlogits));
  });
  check_launch("softmax_cross_entropy backward_kernel");
}

}  // namespace trident::cuda::device
