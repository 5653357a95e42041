// The batch a command takes when --batch is not given, in one place so the commands agree:
// a training batch of 64 (trident train's), an inference batch of 1 (one request: trident
// infer's when its input file holds none). explain and info count the bytes and MACs of the
// graph that train or infer would compile, so they take the batch of their --mode. bench alone
// sizes its batch for the device (cmd_bench.cpp), since it measures throughput.
#pragma once
#include <cstdint>

namespace trident::runtime {

inline constexpr int64_t kDefaultTrainBatch = 64;
inline constexpr int64_t kDefaultInferBatch = 1;

inline int64_t default_batch(bool training) { return training ? kDefaultTrainBatch : kDefaultInferBatch; }

}  // namespace trident::runtime
