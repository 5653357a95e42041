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
// have the device's default (lowest) priority and the lane's the highest, so that the few short
// kernels that make a batch never queue behind the step's. TRIDENT_INPUT_LANE_PRIORITY=low
// turns that round, to be measured against it: the step's streams one above the lowest, the
// lane's the lowest, so that a batch made two steps ahead (and nvJPEG's kernels on its own
// default-priority streams) takes only the multiprocessors the step leaves free.
struct StreamPriorities {
  int step = 0;
  int lane = 0;
};
StreamPriorities stream_priorities();

// A lane for batches of `bytes` over `ctx`'s device, which it allocates from (the staging
// buffer counts in the context's peak device memory); it must not outlive `ctx`.
std::unique_ptr<InputLane> make_cuda_input_lane(CudaContext& ctx, size_t bytes);

}  // namespace trident::cuda
