// Data parallelism in the static plan: every parameter gradient is averaged over the ranks of
// the distributed world before the optimizer reads it. The gradients go in buckets of about
// `allreduce_bucket_bytes` (25 MiB, PyTorch DDP's default), taken in backward order (the last
// layer's gradients are complete first), one allreduce_mean node per bucket, placed right
// before the optimizer (sgd_update or adamw_update), which reads the averaged values:
//
//   backward ──► grad_k … grad_0 ──► allreduce_mean (bucket 0) … allreduce_mean (bucket n) ──► sgd_update / adamw_update
//
// Without an optimizer (gradients as graph outputs) the outputs become the averaged values.
// Runs only when CompileOptions::world_size > 1, so a single-process plan is unchanged.
#include <unordered_map>

#include <algorithm>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/error.h"
#include "ops/optimizer_params.h"
#include "passes/pass.h"

namespace trident::passes {

void allreduce_gradients(ir::Graph& g, PassContext& ctx) {
  const CompileOptions& o = ctx.options;
  if (o.world_size < 2) return;
  if (ctx.param_grads.empty()) throw Error("the model has no parameter gradients to average over the ranks");
  int sgd = -1;
  size_t sgd_pos = g.order().size();
  for (size_t i = 0; i < g.order().size(); ++i)
    if (ops::is_optimizer_op(g.node(g.order()[i]).op)) sgd = g.order()[i], sgd_pos = i;

  std::vector<std::vector<int>> buckets(1);
  size_t bucket_bytes = 0;
  for (auto it = ctx.param_grads.rbegin(); it != ctx.param_grads.rend(); ++it) {
    const ir::Value& grad = g.value(it->second);
    if (bucket_bytes >= static_cast<size_t>(std::max<int64_t>(o.allreduce_bucket_bytes, 1))) {
      buckets.emplace_back();
      bucket_bytes = 0;
    }
    buckets.back().push_back(grad.id);
    bucket_bytes += static_cast<size_t>(numel(grad.shape)) * dtype_size(grad.dtype);
  }

  std::unordered_map<int, int> averaged;  // gradient value -> its allreduce_mean output
  for (size_t b = 0; b < buckets.size(); ++b) {
    const std::vector<int> outs = g.add_node("allreduce_mean", buckets[b], {{"world_size", int64_t{o.world_size}}},
                                             "allreduce_gradients." + std::to_string(b));
    for (size_t i = 0; i < outs.size(); ++i) averaged[buckets[b][i]] = outs[i];
    if (sgd >= 0) g.move_to(g.order().back(), sgd_pos++);
  }
  if (sgd >= 0) {
    for (int& in : g.node(sgd).inputs)
      if (auto f = averaged.find(in); f != averaged.end()) in = f->second;
  } else {
    std::vector<int> outputs = g.outputs();
    for (int& v : outputs)
      if (auto f = averaged.find(v); f != averaged.end()) v = f->second;
    g.set_outputs(outputs);
  }
}

}  // namespace trident::passes
