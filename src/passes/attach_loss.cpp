// Training graphs end in a loss: a labels input and softmax cross-entropy on the model's
// single output (its logits), with the options' label smoothing. The logits stay an output so
// the trainer can count accuracy.
#include "core/error.h"
#include "passes/pass.h"

namespace trident::passes {

void attach_loss(ir::Graph& g, PassContext& ctx) {
  if (g.outputs().size() != 1)
    throw Error("training needs a model with exactly one output (its logits), this one has " +
                std::to_string(g.outputs().size()));
  const int logits = g.outputs()[0];
  const Shape& s = g.value(logits).shape;
  if (s.size() != 2)
    throw Error("training needs logits of shape [batch, classes], the model's output '" +
                g.value(logits).name + "' is " + shape_str(s));
  const int labels = g.add_input("labels", {s[0]}, DType::i32);
  ir::Attrs loss_attrs;
  if (ctx.options.label_smoothing > 0) loss_attrs.set("label_smoothing", ctx.options.label_smoothing);
  ctx.loss = g.add_node1("softmax_cross_entropy", {logits, labels}, loss_attrs, "loss");
  ctx.logits = logits;
  g.set_outputs({ctx.loss, logits});
}

}  // namespace trident::passes
