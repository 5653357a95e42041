// Test support: the memory plan's basic promise, checked by the ONNX fuzz target and its smoke
// test: every placed value lies inside its buffer and has room for all of its elements, so no
// kernel bound to the plan could write past an allocation.
#pragma once
#include <string>

#include "plan/memory_plan.h"

namespace trident::test_support {

// "" when the plan holds every value of `g`, else a sentence naming the first that does not fit.
inline std::string plan_misfit(const ir::Graph& g, const plan::MemoryPlan& p) {
  if (p.placement.size() != static_cast<size_t>(g.num_values())) return "the plan does not place every value";
  for (int v = 0; v < g.num_values(); ++v) {
    const plan::Placement& at = p.placement[v];
    if (at.buffer == plan::Buffer::None) continue;
    const ir::Value& value = g.value(v);
    const size_t need = static_cast<size_t>(numel(value.shape)) * dtype_size(value.dtype);
    const size_t size = p.bytes(at.buffer);
    if (at.bytes < need || at.offset > size || at.bytes > size - at.offset)
      return "value '" + value.name + "' (" + std::to_string(need) + " bytes) is placed at " +
             std::to_string(at.offset) + "+" + std::to_string(at.bytes) + " in a buffer of " + std::to_string(size);
  }
  return "";
}

}  // namespace trident::test_support
