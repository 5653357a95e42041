// allreduce_mean and allreduce_wait: the data-parallel step's gradient exchange, as graph ops so
// the static plan says where it runs. allreduce_mean starts the exchange of one bucket as soon as
// its gradients are complete (on the GPU on a stream of its own, overlapping the rest of the
// backward); allreduce_wait, right before the optimizer, is where the averaged values are
// ready. Both are variadic and in place: output i aliases input i, so the gradients keep their
// place in the flat gradient buffer and the optimizer reads the averaged ones. `world_size` is
// fixed at compile time; the kernel checks it against the world it runs on
// (core/world.h).
#include "ops/op_helpers.h"

namespace trident::ops {

void register_collective_ops() {
  ir::OpDef ar = op_def("allreduce_mean", {"tensors..."}, {"tensors_out..."},
                        "the element-wise mean of each tensor over the ranks of the distributed world, in place");
  ar.variadic = true;
  ar.infer = [](const Node& n, const Graph& g) {
    if (n.inputs.empty()) throw Error("expects at least one tensor");
    if (n.attrs.i("world_size") < 1) throw Error("world_size must be at least 1");
    std::vector<TypeInfo> out;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ir::Value& v = in_value(g, n, i);
      if (v.dtype != DType::f32) throw Error("reduces f32 tensors only, not " + std::string(dtype_name(v.dtype)));
      out.push_back({v.shape, v.dtype});
    }
    return out;
  };
  ar.aliases = [](const Node& n) {
    std::vector<std::pair<int, int>> a;
    for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) a.push_back({i, i});
    return a;
  };
  // Every rank must make the same calls in the same order: never removed, never reordered away.
  ar.side_effects = [](const Node&) { return true; };
  ir::OpRegistry::add(ar);

  ir::OpDef wait = op_def("allreduce_wait", {"tensors..."}, {"tensors_out..."},
                          "its inputs, once the allreduce_mean nodes that produced them have finished");
  wait.variadic = true;
  wait.infer = [](const Node& n, const Graph& g) {
    if (n.inputs.empty()) throw Error("expects at least one tensor");
    std::vector<TypeInfo> out;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ir::Value& v = in_value(g, n, i);
      out.push_back({v.shape, v.dtype});
    }
    return out;
  };
  wait.aliases = ar.aliases;
  wait.side_effects = ar.side_effects;
  ir::OpRegistry::add(wait);
}

}  // namespace trident::ops
