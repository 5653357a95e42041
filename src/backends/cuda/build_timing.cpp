// Scratch memory and event timing for the measurements kernels make while they are built.
#include "backends/cuda/build_timing.h"

#include <algorithm>

namespace trident::cuda {

TimingScratch::~TimingScratch() {
  for (void* p : blocks_) cudaFree(p);
}

void* TimingScratch::get(size_t bytes) {
  const size_t size = std::max<size_t>(bytes, 256);
  void* p = nullptr;
  if (cudaMalloc(&p, size) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  blocks_.push_back(p);
  cudaMemset(p, 0, size);
  return p;
}

float best_of_three_ms(cudaStream_t stream, const std::function<bool()>& enqueue) {
  if (!enqueue() || cudaStreamSynchronize(stream) != cudaSuccess) {
    cudaGetLastError();
    return 0.f;
  }
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  float best = 0.f;
  for (int rep = 0; rep < 3; ++rep) {
    cudaEventRecord(start, stream);
    const bool ok = enqueue();
    cudaEventRecord(stop, stream);
    float ms = 0.f;
    if (!ok || cudaEventSynchronize(stop) != cudaSuccess || cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
      cudaGetLastError();
      best = 0.f;
      break;
    }
    best = rep == 0 ? ms : std::min(best, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

}  // namespace trident::cuda
