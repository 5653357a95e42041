// Column sums for the bias gradient of linear layers: thread o walks column o of the row-major
// [rows, cols] matrix (neighbouring threads read neighbouring columns, so loads coalesce).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/linear.h"

namespace trident::cuda::device {

namespace {

template <class T>
__global__ void column_sums_kernel(const T* __restrict__ dy, int64_t rows, int64_t cols, T* __restrict__ sums) {
  for (int64_t o = grid_start(); o < cols; o += grid_stride()) {
    double s = 0.0;
    for (int64_t n = 0; n < rows; ++n) s += static_cast<double>(to_float(dy[n * cols + o]));
    sums[o] = from_float<T>(static_cast<float>(s));
  }
}

}  // namespace

void launch_column_sums(ElemType t, const void* dy, int64_t rows, int64_t cols, void* sums, cudaStream_t stream) {
  if (cols <= 0) return;
  dispatch_elem(t, [&](auto tag) {
    using T = decltype(tag);
    column_sums_kernel<T><<<grid_for(cols), kThreads, 0, stream>>>(static_cast<const T*>(dy), rows, cols,
                                                                   static_cast<T*>(sums));
  });
  check_launch("column_sums_kernel");
}

}  // namespace trident::cuda::device
