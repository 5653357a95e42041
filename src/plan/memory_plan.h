// The static memory plan: every value gets a buffer and an offset before the first step.
// Parameters, their gradients (same order, same offsets) and state live in flat buffers;
// intermediates share one arena by liveness; views and in-place updates share their input's
// storage. Nothing is allocated while training.
#pragma once
#include <cstddef>
#include <vector>

#include "ir/graph.h"

namespace trident::plan {

// Constants: outputs of hoisted nodes (e.g. folded weights), computed once per weight update.
enum class Buffer { None, Inputs, Params, Grads, State, Arena, Constants };
constexpr int kNumBuffers = 7;
constexpr size_t kAlignment = 64;

struct Placement {
  Buffer buffer = Buffer::None;
  size_t offset = 0;
  size_t bytes = 0;
};

// One arena allocation: a storage root and the steps (indices into the order) it is live.
struct ArenaBlock {
  int root = -1;
  size_t offset = 0, bytes = 0;
  int first = 0, last = 0;  // inclusive
};

struct MemoryPlan {
  std::vector<Placement> placement;  // by value id; Buffer::None for values never touched
  std::vector<int> root;             // by value id: the value whose storage it shares
  std::vector<ArenaBlock> arena_blocks;
  size_t buffer_bytes[kNumBuffers] = {};
  size_t arena_unshared_bytes = 0;   // what the arena would need without sharing
  std::vector<char> hoisted;         // by node id: runs once per weight update, not per step

  size_t bytes(Buffer b) const { return buffer_bytes[static_cast<int>(b)]; }
};

// `param_grads` pairs each parameter with its gradient value (empty for inference).
// With `hoist_constants` (inference, where weights do not change during a step), nodes that
// read only parameters, state and other hoisted results are marked hoisted and their outputs
// go to the Constants buffer.
// `concurrent` lists positions i of the order whose node runs at the same time as node i + 1
// (a backend's second stream): every value either of the two reads or writes is kept live
// across both steps, so neither writes where the other reads.
MemoryPlan plan_memory(const ir::Graph& g, const std::vector<std::pair<int, int>>& param_grads,
                       bool hoist_constants = false, const std::vector<int>& concurrent = {});

}  // namespace trident::plan
