// One chain fusion written as a rule, and the one loop that applies every rule. A rule names
// the op that anchors a candidate, says which anchors are candidates at all, checks legality
// (the refusal sentence `trident explain` shows, or empty), and builds the fused node. The loop
// visits the anchors in execution order and recounts who reads what before each one, since
// every fusion before it rewired the graph; each candidate ends fused or refused with its
// reason, never silently skipped.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pass.h"
#include "passes/value_uses.h"

namespace trident::passes {

template <class Match>
struct ChainRule {
  std::string pass;       // the pass the fusions and refusals are recorded under
  std::string anchor_op;  // the op of the node a candidate is found from
  // Whether anchor `id` starts this pattern at all (one that does not is no refusal); null: every anchor.
  std::function<bool(const ir::Graph&, const ValueUses&, int id)> candidate;
  // Empty when the chain from anchor `id` may fuse, else the reason in one sentence; fills the match.
  std::function<std::string(const ir::Graph&, const ValueUses&, int id, Match&)> refusal;
  // The pattern's name for a refused candidate (what refusal() filled in).
  std::function<std::string(const Match&)> pattern;
  // Rewires the graph (passes/graph_edit.h) and says what it fused.
  std::function<FusionRecord(ir::Graph&, const Match&)> build;
};

template <class Match>
void apply_chain_rule(ir::Graph& g, PassContext& ctx, const ChainRule<Match>& rule) {
  const std::vector<int> order = g.order();
  for (int id : order) {
    if (g.node(id).op != rule.anchor_op) continue;
    const ValueUses uses(g);
    if (rule.candidate && !rule.candidate(g, uses, id)) continue;
    Match m;
    const std::string reason = rule.refusal(g, uses, id, m);
    if (!reason.empty()) {
      ctx.rejections.push_back({rule.pass, rule.pattern(m), g.node(id).name, reason});
      continue;
    }
    ctx.fusions.push_back(rule.build(g, m));
  }
}

}  // namespace trident::passes
