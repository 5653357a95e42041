// Data parallelism in the static plan: every parameter gradient is averaged over the ranks of
// the distributed world before the optimizer reads it. The gradients go in buckets of about
// `allreduce_bucket_bytes` (25 MiB, PyTorch DDP's default), taken in backward order (the last
// layer's gradients are complete first), one allreduce_mean node per bucket, placed right after
// the last node that produces one of its gradients, so that the exchange of a bucket can overlap
// the rest of the backward (the cuda backend runs it on a stream of its own; under mixed precision
// each bucket takes its own cast of its gradients to f32 for that). One allreduce_wait
// node over every averaged gradient stands right before the optimizer (sgd_update or
// adamw_update), which reads its outputs:
//
//   … grad_k ──► allreduce_mean (bucket 0) … grad_0 ──► allreduce_mean (bucket n) ──► allreduce_wait ──► sgd_update
//
// Without an optimizer (gradients as graph outputs) the outputs become the waited values.
// Runs only under a distributed world (CompileOptions::distributed), so a single-process plan
// is unchanged; a world of one rank plans the same collectives as a larger one.
#include <algorithm>
#include <unordered_map>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "ops/optimizer_params.h"
#include "passes/pass.h"

namespace trident::passes {

namespace {

// Position in the order right after the last producer of `values` (0 when none has one).
size_t after_producers(const ir::Graph& g, const std::vector<int>& values) {
  std::unordered_map<int, size_t> position;
  for (size_t i = 0; i < g.order().size(); ++i) position[g.order()[i]] = i;
  size_t after = 0;
  for (int v : values)
    if (const int p = g.value(v).producer; p >= 0) after = std::max(after, position.at(p) + 1);
  return after;
}

// Mixed precision: the f16/bf16 → f32 casts of the weight gradients are one cast_group at the end
// of the backward (group_weight_casts' backward), which would hold every bucket back until the
// last gradient exists. Each bucket takes its own cast_group of the gradients it holds, placed
// right after their producers; `bucket` and ctx.param_grads then name the new f32 values, and
// the original group, once none of its outputs is read, is removed by dce.
void split_gradient_casts(ir::Graph& g, PassContext& ctx, std::vector<int>& bucket, size_t index) {
  std::unordered_map<int, std::vector<size_t>> by_group;  // cast_group node -> positions in bucket
  for (size_t i = 0; i < bucket.size(); ++i)
    if (const int p = g.value(bucket[i]).producer; p >= 0 && g.node(p).op == "cast_group") by_group[p].push_back(i);
  for (auto& [group, positions] : by_group) {
    const ir::Node& cast = g.node(group);
    if (positions.size() == cast.outputs.size()) continue;  // the bucket holds the whole group
    std::vector<int> inputs;
    for (size_t i : positions)
      inputs.push_back(cast.inputs[static_cast<size_t>(
          std::find(cast.outputs.begin(), cast.outputs.end(), bucket[i]) - cast.outputs.begin())]);
    const ir::Attrs attrs = cast.attrs;
    const std::string name = cast.name + ".bucket" + std::to_string(index);
    const size_t at = after_producers(g, inputs);
    const std::vector<int> casts = g.add_node("cast_group", inputs, attrs, name);
    g.move_to(g.order().back(), at);
    for (size_t k = 0; k < positions.size(); ++k) {
      const int old_grad = bucket[positions[k]];
      g.value(casts[k]).name = g.value(old_grad).name;
      g.value(old_grad).name += ".unbucketed";  // a name finds the live value
      g.replace_uses(old_grad, casts[k]);
      for (auto& pg : ctx.param_grads)
        if (pg.second == old_grad) pg.second = casts[k];
      bucket[positions[k]] = casts[k];
    }
  }
}

}  // namespace

void allreduce_gradients(ir::Graph& g, PassContext& ctx) {
  const CompileOptions& o = ctx.options;
  if (!o.distributed) return;
  if (o.world_size < 1) throw Error("a distributed world has at least one rank, not " + std::to_string(o.world_size));
  if (ctx.param_grads.empty()) throw Error("the model has no parameter gradients to average over the ranks");

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

  std::vector<int> grads, all_averaged;  // every gradient, and its allreduce_mean output
  for (size_t b = 0; b < buckets.size(); ++b) {
    split_gradient_casts(g, ctx, buckets[b], b);
    const size_t at = after_producers(g, buckets[b]);
    const std::vector<int> outs = g.add_node("allreduce_mean", buckets[b], {{"world_size", int64_t{o.world_size}}},
                                             "allreduce_gradients." + std::to_string(b));
    g.move_to(g.order().back(), at);
    grads.insert(grads.end(), buckets[b].begin(), buckets[b].end());
    all_averaged.insert(all_averaged.end(), outs.begin(), outs.end());
  }

  int optimizer = -1;
  size_t optimizer_pos = g.order().size();
  for (size_t i = 0; i < g.order().size(); ++i)
    if (ops::is_optimizer_op(g.node(g.order()[i]).op)) optimizer = g.order()[i], optimizer_pos = i;
  const std::vector<int> waited = g.add_node("allreduce_wait", all_averaged, {}, "allreduce_gradients.wait");
  g.move_to(g.order().back(), optimizer_pos);
  std::unordered_map<int, int> ready;  // gradient value -> its waited average
  for (size_t i = 0; i < grads.size(); ++i) ready[grads[i]] = waited[i];
  if (optimizer >= 0) {
    for (int& in : g.node(optimizer).inputs)
      if (auto f = ready.find(in); f != ready.end()) in = f->second;
  } else {
    std::vector<int> outputs = g.outputs();
    for (int& v : outputs)
      if (auto f = ready.find(v); f != ready.end()) v = f->second;
    g.set_outputs(outputs);
  }
}

}  // namespace trident::passes
