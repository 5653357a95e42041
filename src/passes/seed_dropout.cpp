// Training: every `dropout` of the model becomes a mask drawn from the run's random state and
// a mul, so autodiff gives it mul's backward (dx = dy·mask) and the mask is all it saves:
//
//   x ──► dropout(p) ──► y        ⇒   rng ──► dropout_mask(p, salt k) ──► m   ([N,1,1,C] per sample)
//                                      x, m ──► mul ──► y
//                                      rng, m… ──► rng_advance   (after every mask is drawn)
//
// The state (ops/dropout.h) is made here, once per graph, with a key drawn from the run's seed
// as every initial value is; the k-th dropout gets salt k, so two dropouts never share a mask.
// Runs after assign_precision, so the mask has the dtype its mul reads.
#include "core/error.h"
#include "ops/dropout.h"
#include "passes/pass.h"

namespace trident::passes {

void seed_dropout(ir::Graph& g, PassContext&) {
  std::vector<int> dropouts;
  for (int nid : g.order())
    if (g.node(nid).op == "dropout") dropouts.push_back(nid);
  if (dropouts.empty()) return;
  if (g.find_value(ops::kDropoutStateName) >= 0)
    throw Error(std::string("the model already has a value named '") + ops::kDropoutStateName +
                "', the name of dropout's random state");
  const int rng = g.add_state(ops::kDropoutStateName, {2}, {ir::Init::RandomBits}, DType::i32);
  std::vector<int> after{rng};
  std::vector<int> order = g.order();
  std::vector<int> rewritten;
  int64_t salt = 0;
  for (int nid : dropouts) {
    const ir::Node n = g.node(nid);  // a copy: add_node may move the node table
    const ir::Value& x = g.value(n.inputs[0]);
    // Per sample (stochastic depth): one draw for each sample's C mask values, which mul spreads
    // over H and W ([N,1,1,C]; a 2-D [N,F] takes its mask whole).
    const bool per_sample = n.attrs.i("per_sample", 0) != 0;
    const Shape shape = per_sample && x.shape.size() == 4 ? Shape{x.shape[0], 1, 1, x.shape[3]} : x.shape;
    const int64_t group = per_sample ? shape.back() : 1;
    const int mask = g.add_node1("dropout_mask", {rng},
                                 {{"p", n.attrs.f("p")}, {"salt", salt++}, {"shape", shape}, {"group", group},
                                  {"dtype", std::string(dtype_name(x.dtype))}},
                                 n.name + ".mask");
    g.value(n.outputs[0]).name += ".replaced";  // the live value below takes the model's name
    const int y = g.add_node1("mul", {n.inputs[0], mask}, {}, n.name);
    g.replace_uses(n.outputs[0], y);
    after.push_back(mask);
    // The two new nodes take the dropout's place in the order.
    rewritten.push_back(g.value(mask).producer);
    rewritten.push_back(g.value(y).producer);
  }
  const int advance = g.add_node("rng_advance", after, {}, "dropout.rng_advance")[0];
  // Rebuild the order: each dropout replaced by its mask and mul, the advance after the last.
  std::vector<int> new_order;
  size_t next = 0;
  for (int nid : order) {
    if (g.node(nid).op != "dropout") {
      new_order.push_back(nid);
      continue;
    }
    new_order.push_back(rewritten[next++]);
    new_order.push_back(rewritten[next++]);
    if (next == rewritten.size()) new_order.push_back(g.value(advance).producer);
  }
  g.set_order(std::move(new_order));
}

}  // namespace trident::passes
