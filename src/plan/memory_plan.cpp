// Liveness-based arena planning: blocks are placed largest first at the lowest offset that
// does not overlap any already-placed block whose lifetime intersects (a greedy best-known
// heuristic; optimal placement is NP-hard and the greedy result is within a few % in practice).
#include "plan/memory_plan.h"

#include <algorithm>

#include "core/checked_math.h"
#include "core/error.h"
#include "ir/op_registry.h"

namespace trident::plan {

namespace {
// Byte counts and offsets are checked: a graph built from a file must never size a buffer
// from a wrapped count.
const std::string kWhat = "the memory plan";
size_t align(size_t n) { return checked_add(n, kAlignment - 1, kWhat) / kAlignment * kAlignment; }
size_t value_bytes(const ir::Value& v) {
  return checked_bytes(checked_numel(v.shape, "value '" + v.name + "'"), dtype_size(v.dtype), "value '" + v.name + "'");
}
}  // namespace

MemoryPlan plan_memory(const ir::Graph& g, const std::vector<std::pair<int, int>>& param_grads,
                       bool hoist_constants, const std::vector<int>& concurrent) {
  MemoryPlan plan;
  const int nv = g.num_values();
  plan.placement.resize(nv);
  plan.root.resize(nv);
  for (int v = 0; v < nv; ++v) plan.root[v] = v;

  // Storage sharing: views and in-place outputs take their input's root.
  const auto& order = g.order();
  for (int nid : order) {
    const ir::Node& n = g.node(nid);
    for (auto [o, i] : ir::OpRegistry::get(n.op).aliases(n)) {
      const ir::Value &out = g.value(n.outputs.at(o)), &in = g.value(n.inputs.at(i));
      if (value_bytes(out) != value_bytes(in))
        throw Error("internal error: node '" + n.name + "' aliases tensors of different sizes");
      plan.root[out.id] = plan.root[in.id];
    }
  }

  auto place = [&](int v, Buffer b) {
    Placement& p = plan.placement[v];
    p.buffer = b;
    p.bytes = value_bytes(g.value(v));
    p.offset = plan.buffer_bytes[static_cast<int>(b)];
    plan.buffer_bytes[static_cast<int>(b)] = checked_add(p.offset, align(p.bytes), kWhat);
  };

  // Flat buffers: every input, parameter and state tensor, in creation order.
  for (int v = 0; v < nv; ++v) {
    switch (g.value(v).role) {
      case ir::ValueRole::Input: place(v, Buffer::Inputs); break;
      case ir::ValueRole::Parameter: place(v, Buffer::Params); break;
      case ir::ValueRole::State: place(v, Buffer::State); break;
      default: break;
    }
  }
  // Hoisted nodes: every input constant, no side effects; their outputs are constants too.
  plan.hoisted.assign(static_cast<size_t>(g.num_nodes()), 0);
  std::vector<char> constant(nv, 0);
  for (int v = 0; v < nv; ++v)
    constant[v] = g.value(v).role == ir::ValueRole::Parameter || g.value(v).role == ir::ValueRole::State;
  if (hoist_constants) {
    for (int nid : order) {
      const ir::Node& n = g.node(nid);
      bool all = !ir::OpRegistry::get(n.op).side_effects(n);
      for (int in : n.inputs) all = all && constant[in];
      if (!all) continue;
      plan.hoisted[nid] = 1;
      for (int out : n.outputs) {
        constant[out] = 1;
        if (plan.root[out] == out) place(out, Buffer::Constants);
      }
    }
  }

  // Gradients mirror the parameter buffer, so the optimizer walks both with one index.
  std::vector<char> in_grads(nv, 0);
  plan.buffer_bytes[static_cast<int>(Buffer::Grads)] = plan.bytes(Buffer::Params);
  for (auto [p, gp] : param_grads) {
    if (plan.root[gp] != gp || in_grads[gp] || g.value(gp).role != ir::ValueRole::Activation) continue;
    in_grads[gp] = 1;
    plan.placement[gp] = {Buffer::Grads, plan.placement[p].offset, value_bytes(g.value(gp))};
  }

  // Lifetimes of arena roots over the execution order.
  std::vector<int> first(nv, -1), last(nv, -1);
  for (int step = 0; step < static_cast<int>(order.size()); ++step) {
    const ir::Node& n = g.node(order[step]);
    for (int out : n.outputs) {
      int r = plan.root[out];
      if (first[r] < 0) first[r] = step;
      last[r] = std::max(last[r], step);
    }
    for (int in : n.inputs) last[plan.root[in]] = std::max(last[plan.root[in]], step);
  }
  for (int out : g.outputs()) last[plan.root[out]] = static_cast<int>(order.size());
  // Two nodes that run at once: what either touches is live from the first step to the second.
  for (int i : concurrent) {
    if (i < 0 || i + 1 >= static_cast<int>(order.size())) continue;
    for (int step : {i, i + 1}) {
      const ir::Node& n = g.node(order[step]);
      for (const std::vector<int>* values : {&n.inputs, &n.outputs})
        for (int v : *values) {
          const int r = plan.root[v];
          if (first[r] < 0) continue;  // not produced by a node: never in the arena
          first[r] = std::min(first[r], i);
          last[r] = std::max(last[r], i + 1);
        }
    }
  }

  std::vector<ArenaBlock> blocks;
  for (int v = 0; v < nv; ++v) {
    if (plan.root[v] != v || first[v] < 0 || in_grads[v] || plan.placement[v].buffer != Buffer::None) continue;
    if (g.value(v).role != ir::ValueRole::Activation) continue;
    blocks.push_back({v, 0, align(value_bytes(g.value(v))), first[v], last[v]});
    plan.arena_unshared_bytes = checked_add(plan.arena_unshared_bytes, blocks.back().bytes, kWhat);
  }
  std::sort(blocks.begin(), blocks.end(), [](const ArenaBlock& a, const ArenaBlock& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.first < b.first;
  });
  std::vector<ArenaBlock> placed;
  size_t arena = 0;
  for (ArenaBlock b : blocks) {
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping lifetimes
    for (const ArenaBlock& p : placed)
      if (p.first <= b.last && b.first <= p.last) busy.push_back({p.offset, p.offset + p.bytes});
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (auto [s, e] : busy) {
      if (checked_add(offset, b.bytes, kWhat) <= s) break;
      offset = std::max(offset, e);
    }
    b.offset = offset;
    arena = std::max(arena, checked_add(offset, b.bytes, kWhat));
    placed.push_back(b);
  }
  plan.buffer_bytes[static_cast<int>(Buffer::Arena)] = arena;
  for (const ArenaBlock& b : placed) plan.placement[b.root] = {Buffer::Arena, b.offset, value_bytes(g.value(b.root))};
  plan.arena_blocks = std::move(placed);

  // Aliases point at their root's storage.
  for (int v = 0; v < nv; ++v)
    if (plan.root[v] != v) {
      plan.placement[v] = plan.placement[plan.root[v]];
      plan.placement[v].bytes = value_bytes(g.value(v));
    }
  return plan;
}

}  // namespace trident::plan
