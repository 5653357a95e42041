// The cuda backend's input lane (backends/input_lane.h): a copy stream of its own, two
// page-locked host buffers taken in turn, one device staging buffer, and the events that order
// them against the context's compute stream and time how long a step waited for its batch.
#pragma once
#include <cstddef>
#include <memory>

#include "backends/input_lane.h"

namespace trident::cuda {

class CudaContext;

// The priorities of the context's streams (the step's) and of the lane's. By default the step's
// are one above the device's lowest and the lane's the lowest: a batch is made two steps ahead,
// so its decoding and resampling kernels (and nvJPEG's on its own default-priority streams) take
// the multiprocessors the step leaves free instead of the step's (0.2-0.6 % more images/s than
// the other way round, docs/GPU.md). TRIDENT_INPUT_LANE_PRIORITY=high gives that other way, to
// measure one against the other: the step's streams at the default, the lane's at the highest.
struct StreamPriorities {
  int step = 0;
  int lane = 0;
};
StreamPriorities stream_priorities();

// A lane for batches of `bytes` over `ctx`'s device, which it allocates from (the staging
// buffer counts in the context's peak device memory); it must not outlive `ctx`.
std::unique_ptr<InputLane> make_cuda_input_lane(CudaContext& ctx, size_t bytes);

}  // namespace trident::cuda
