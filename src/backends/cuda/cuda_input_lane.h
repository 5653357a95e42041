// The cuda backend's input lane (backends/input_lane.h): a copy stream of its own, two
// page-locked host buffers taken in turn, one device staging buffer, and the events that order
// them against the context's compute stream and time how long a step waited for its batch.
#pragma once
#include <cstddef>
#include <memory>

#include "backends/input_lane.h"

namespace trident::cuda {

class CudaContext;

// A lane for batches of `bytes` over `ctx`'s device, which it allocates from (the staging
// buffer counts in the context's peak device memory); it must not outlive `ctx`.
std::unique_ptr<InputLane> make_cuda_input_lane(CudaContext& ctx, size_t bytes);

}  // namespace trident::cuda
