// Mixed precision (AMP): with CompileOptions::precision f16 or bf16, activations and the
// operands of convolutions and linear layers become reduced precision, while parameters stay
// f32 master copies, BN parameters and statistics stay f32 (BN reads f16 x with f32 gamma),
// and the loss is reduced in f32. The pass inserts one `cast` per source value that needs it
// (a weight's f16 copy, the images) right before its first reader, then re-infers every
// node's output dtypes in order, so the change flows through the graph by the ops' own rules.
// Training runs it before autodiff: a cast's backward casts gradients back to f32. The logits
// leave the graph as f32 (a cast), so callers read the same dtype at every precision.
#include "core/error.h"
#include "ir/op_registry.h"
#include "passes/derived_inputs.h"
#include "passes/pass.h"

namespace trident::passes {

void assign_precision(ir::Graph& g, PassContext& ctx) {
  const DType low = ctx.options.precision;
  if (low == DType::f32) return;
  if (low != DType::f16 && low != DType::bf16)
    throw Error("precision " + std::string(dtype_name(low)) + " is not a mixed precision (use f16 or bf16)");
  const std::string low_name(dtype_name(low));
  use_derived_inputs(
      g,
      [&](const ir::Node& n, size_t i) {
        return g.value(n.inputs[i]).dtype == DType::f32 && !ir::OpRegistry::get(n.op).keeps_f32(i);
      },
      [&](int v) { return g.add_node1("cast", {v}, {{"dtype", low_name}}, g.value(v).name + "." + low_name); },
      [&](ir::Node& n) {  // the node's outputs take the dtypes its op gives the new inputs
        const std::vector<ir::TypeInfo> types = ir::OpRegistry::get(n.op).infer(n, g);
        for (size_t k = 0; k < n.outputs.size() && k < types.size(); ++k) g.value(n.outputs[k]).dtype = types[k].dtype;
      });

  // The logits leave the graph in f32 (the trainer's accuracy and `infer --output` read f32).
  if (ctx.logits >= 0 && g.value(ctx.logits).dtype != DType::f32) {
    const int f32 = g.add_node1("cast", {ctx.logits}, {{"dtype", std::string("f32")}}, "logits.f32");
    std::vector<int> outs = g.outputs();
    for (int& o : outs)
      if (o == ctx.logits) o = f32;
    g.set_outputs(outs);
    ctx.logits = f32;
  }
}

}  // namespace trident::passes
