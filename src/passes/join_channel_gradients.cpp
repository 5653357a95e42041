// Training, after autodiff: the gradient of a tensor that several channel slices read (an
// ONNX Split, ShuffleNet v2's x.chunk(2, dim=1)) arrives as each slice's gradient placed back
// into the full channels — channel_slice with a start ≤ 0, zeros outside the slice — summed by
// adds. Where the placed ranges do not overlap, that sum is their concat, with zeros (a fill)
// in channels no slice covers: one write of the tensor instead of a zero-filled placement per
// slice and an add per pair.
//
//   dy0 ─ channel_slice(start 0, C) ───┐
//                                      add ──► dx       ⇒   concat(dy0, dy1) ──► dx
//   dy1 ─ channel_slice(start −C0, C) ─┘
//
// Each placement and each inner add of the tree has the tree as its only reader and is no
// graph output; the sum is no parameter's gradient. Terms of the tree that are not placements
// (the tensor also read whole, by a convolution or a concat) are added to the concat. The
// values are those of the adds (x + 0 = x; only a −0 keeps its sign, and more than one other
// term may be added in another order). Each tree of two placements or more is joined or
// recorded with the reason it was refused.
#include <algorithm>
#include <set>

#include "passes/graph_edit.h"
#include "passes/pass.h"

namespace trident::passes {

namespace {

constexpr const char* kPass = "join_channel_gradients";
constexpr const char* kPattern = "slice-gradient-sum";

struct Placement {
  int node = -1, source = -1;
  int64_t offset = 0, width = 0;  // the channels [offset, offset + width) of the sum it fills
};

class Joiner {
 public:
  Joiner(ir::Graph& g, PassContext& ctx) : g_(g), ctx_(ctx), users_(g.users()) {
    for (int v : g.outputs()) kept_.insert(v);
    for (auto [p, gp] : ctx.param_grads) kept_.insert(gp);
  }

  void run() {
    const std::vector<int> order = g_.order();
    for (auto it = order.rbegin(); it != order.rend(); ++it)  // outermost adds first
      if (!done_.count(*it) && g_.node(*it).op == "add") join(*it);
  }

 private:
  // Whether `v` is a placement: a channel_slice whose whole input lands inside its output.
  bool placement(int v, Placement& p) const {
    const int producer = g_.value(v).producer;
    if (producer < 0 || g_.node(producer).op != "channel_slice") return false;
    const ir::Node& n = g_.node(producer);
    p = {producer, n.inputs[0], -n.attrs.i("start", 0), g_.value(n.inputs[0]).shape.back()};
    return p.offset >= 0 && p.offset + p.width <= g_.value(v).shape.back();
  }

  bool private_value(int v) const {
    return v < static_cast<int>(users_.size()) && users_[v].size() == 1 && !kept_.count(v);
  }

  // Splits the add tree under value `v` (its inner adds private to it) into its leaves: the
  // placements a join may remove, and every other term.
  void collect(int v, bool root, std::vector<int>& adds, std::vector<Placement>& placed, std::vector<int>& others) {
    const int producer = g_.value(v).producer;
    if (root || (producer >= 0 && g_.node(producer).op == "add" && private_value(v))) {
      adds.push_back(producer);
      for (int in : g_.node(producer).inputs) collect(in, false, adds, placed, others);
      return;
    }
    Placement p;
    const ir::Value& sum = g_.value(g_.node(adds.front()).outputs[0]);
    if (placement(v, p) && private_value(v) && g_.value(v).shape == sum.shape && g_.value(v).dtype == sum.dtype)
      placed.push_back(p);
    else
      others.push_back(v);
  }

  void join(int root) {
    const int sum = g_.node(root).outputs[0];
    std::vector<int> adds, others;
    std::vector<Placement> placed;
    collect(sum, true, adds, placed, others);
    if (placed.size() < 2) return;  // no two slices' gradients to join: not a candidate
    const ir::Value s = g_.value(sum);  // a copy: adding nodes moves the values
    std::string why;
    for (auto [p, gp] : ctx_.param_grads)
      if (gp == sum) why = "the sum is a parameter's gradient";
    std::sort(placed.begin(), placed.end(), [](const Placement& a, const Placement& b) { return a.offset < b.offset; });
    for (size_t i = 1; i < placed.size() && why.empty(); ++i)
      if (placed[i].offset < placed[i - 1].offset + placed[i - 1].width)
        why = "the placed slices overlap at channel " + std::to_string(placed[i].offset);
    if (!why.empty()) {
      ctx_.rejections.push_back({kPass, kPattern, g_.node(root).name, why});
      done_.insert(adds.begin(), adds.end());  // its inner adds hold the same placements: refused once
      return;
    }
    // The concat's inputs in channel order: each slice's gradient, a zero fill for each gap;
    // the tree's other terms are added to it.
    const std::string name = g_.node(root).name + ".joined";
    const std::string dtype(dtype_name(s.dtype));
    std::vector<int> parts, made;
    std::vector<std::string> replaced;
    int64_t at = 0;
    auto gap = [&](int64_t to) {
      if (to <= at) return;
      Shape shape = s.shape;
      shape.back() = to - at;
      parts.push_back(g_.add_node1("fill", {}, {{"shape", shape}, {"value", 0.0}, {"dtype", dtype}},
                                   name + ".zeros" + std::to_string(at)));
      made.push_back(g_.value(parts.back()).producer);
    };
    for (const Placement& p : placed) {
      gap(p.offset);
      parts.push_back(p.source);
      at = p.offset + p.width;
      replaced.push_back(g_.node(p.node).name);
    }
    gap(s.shape.back());
    int joined = g_.add_node1("concat", parts, {}, name);
    made.push_back(g_.value(joined).producer);
    for (size_t i = 0; i < others.size(); ++i) {
      joined = g_.add_node1("add", {joined, others[i]}, {}, name + ".sum" + std::to_string(i));
      made.push_back(g_.value(joined).producer);
    }
    g_.replace_uses(sum, joined);
    std::vector<int> gone = adds;
    for (const Placement& p : placed) gone.push_back(p.node);
    replace_nodes(g_, made, root, gone);  // just before the root add, after every source
    for (int id : adds) {
      done_.insert(id);
      replaced.push_back(g_.node(id).name);
    }
    ctx_.fusions.push_back({kPass, kPattern, name, replaced});
  }

  ir::Graph& g_;
  PassContext& ctx_;
  std::vector<std::vector<int>> users_;
  std::set<int> kept_, done_;
};

}  // namespace

void join_channel_gradients(ir::Graph& g, PassContext& ctx) { Joiner(g, ctx).run(); }

}  // namespace trident::passes
