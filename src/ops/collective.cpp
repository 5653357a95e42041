// allreduce_mean: the data-parallel step's gradient exchange, as a graph op so the static plan
// says where it runs (after the backward, before the optimizer step). Variadic and in place: output i
// aliases input i, so the gradients keep their place in the flat gradient buffer and the
// optimizer reads the averaged ones. `world_size` is fixed at compile time; the kernel checks
// it against the communicator it runs on (runtime/distributed/world.h).
#include "ops/op_helpers.h"

namespace trident::ops {

void register_collective_ops() {
  ir::OpDef ar = op_def("allreduce_mean", {"tensors..."}, {"tensors_out..."},
                        "the element-wise mean of each tensor over the ranks of the distributed world, in place");
  ar.variadic = true;
  ar.infer = [](const Node& n, const Graph& g) {
    if (n.inputs.empty()) throw Error("expects at least one tensor");
    if (n.attrs.i("world_size") < 2) throw Error("world_size must be at least 2");
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
}

}  // namespace trident::ops
