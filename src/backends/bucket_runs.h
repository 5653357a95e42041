// What every backend's allreduce_mean kernel checks and computes the same way: whether the world
// it was given is the one the plan was compiled for, and the runs of back-to-back tensors of a
// bucket (one collective call each, instead of one per tensor).
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/world.h"

namespace trident::distributed {

// Why an allreduce_mean compiled for `expected` ranks cannot run over `world` (null: no world), or "".
inline std::string world_size_problem(const World* world, int64_t expected) {
  if (!world)
    return "averages over " + std::to_string(expected) +
           " ranks, but this executable has no distributed world; run it under mpirun";
  if (world->size() != expected)
    return "was compiled for " + std::to_string(expected) + " ranks, but the world has " + std::to_string(world->size());
  return "";
}

// Tensors (start, elements) sorted by address, each run of tensors that lie back to back merged into one.
inline std::vector<std::pair<float*, size_t>> contiguous_runs(std::vector<std::pair<float*, size_t>> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<float*, size_t>> runs;
  for (const auto& s : spans) {
    if (!runs.empty() && runs.back().first + runs.back().second == s.first)
      runs.back().second += s.second;
    else
      runs.push_back(s);
  }
  return runs;
}

}  // namespace trident::distributed
