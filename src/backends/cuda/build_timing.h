// Timing alternatives while a kernel is built (cuDNN plan candidates, cbr's statistics paths):
// zero-filled scratch memory that lives as long as the measurement, and the best of three
// timed runs after a warm-up. Used once per kernel at compile time, never in a step.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace trident::cuda {

// Zero-filled device blocks, freed with the object. get() returns nullptr (and clears the
// CUDA error) when memory is short, so the caller can skip the measurement.
class TimingScratch {
 public:
  TimingScratch() = default;
  TimingScratch(const TimingScratch&) = delete;
  TimingScratch& operator=(const TimingScratch&) = delete;
  ~TimingScratch();
  void* get(size_t bytes);

 private:
  std::vector<void*> blocks_;
};

// Milliseconds of the fastest of three runs of `enqueue` on `stream`, after one warm-up run
// (which loads the kernels). `enqueue` returns false when it could not enqueue; then, or when
// a run fails on the device, the result is 0 and the CUDA error is cleared.
float best_of_three_ms(cudaStream_t stream, const std::function<bool()>& enqueue);

}  // namespace trident::cuda
