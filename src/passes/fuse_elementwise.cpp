// Generic element-wise fusion, after the pattern passes have taken what they know:
//
//   vertical:    relu/add ──► relu/add ──► ...        ⇒   elementwise {one program}
//                (each intermediate has exactly one consumer)
//   horizontal:  x ──► relu/add/elementwise  ×N        ⇒   elementwise {N programs}
//                (siblings reading the same input, their operands ready before the first)
//
// A chain stops at a reduction (pooling, normalisation, loss), a shape change (flatten,
// reshape), a non-element-wise op or a value with several consumers; each stop that leaves
// a lone element-wise op unfused is recorded with its reason.
#include <map>

#include "ir/op_registry.h"
#include "ops/elementwise_program.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/value_uses.h"

namespace trident::passes {

namespace {

bool is_elementwise(const std::string& op) { return ir::OpRegistry::get(op).elementwise; }

std::string stop_reason(const ir::Graph& g, const ValueUses& uses, int v) {
  if (uses.consumers(v) > 1) return "its output has " + std::to_string(uses.consumers(v)) + " consumers";
  if (uses.readers(v).empty()) return "";  // only a graph output: the chain simply ends
  const ir::Node& next = g.node(uses.readers(v)[0]);
  if (is_elementwise(next.op)) return "";
  const ir::OpDef& def = ir::OpRegistry::get(next.op);
  if (def.reduction) return "the next node '" + next.name + "' (" + next.op + ") is a reduction";
  if (def.view)
    return "the next node '" + next.name + "' changes the shape";
  return "the next node '" + next.name + "' (" + next.op + ") is not element-wise";
}

void replace_node(ir::Graph& g, const std::vector<int>& old_nodes, const std::vector<int>& old_outputs,
                  const std::vector<int>& inputs, const std::string& programs, const std::string& name,
                  size_t position_of) {
  const std::vector<int> outs = g.add_node("elementwise", inputs, {{"programs", programs}}, name);
  for (size_t i = 0; i < outs.size(); ++i) g.replace_uses(old_outputs[i], outs[i]);
  replace_nodes(g, {g.value(outs[0]).producer}, static_cast<int>(position_of), old_nodes);
}

void fuse_vertical(ir::Graph& g, PassContext& ctx) {
  const std::vector<int> order = g.order();
  std::vector<char> taken(g.num_nodes(), 0);
  for (int head : order) {
    if (taken[head] || !is_elementwise(g.node(head).op)) continue;
    const ValueUses uses(g);
    std::vector<int> chain{head};
    const ir::Node h = g.node(head);
    std::vector<int> inputs{h.inputs[0]};
    std::string program = h.op == "relu" ? "relu" : "add:1";
    if (h.op == "add") inputs.push_back(h.inputs[1]);
    int running = h.outputs[0];
    std::string reason;
    for (;;) {
      reason = stop_reason(g, uses, running);
      if (!reason.empty() || uses.readers(running).empty()) break;
      const ir::Node& next = g.node(uses.readers(running)[0]);
      if (next.op == "add") {
        if (next.inputs[0] == next.inputs[1]) {
          reason = "'" + next.name + "' adds a value to itself";
          break;
        }
        inputs.push_back(next.inputs[0] == running ? next.inputs[1] : next.inputs[0]);
        program += ",add:" + std::to_string(inputs.size() - 1);
      } else {
        program += ",relu";
      }
      chain.push_back(next.id);
      running = next.outputs[0];
    }
    for (int id : chain) taken[id] = 1;
    if (chain.size() < 2) {
      if (!reason.empty()) ctx.rejections.push_back({"fuse_elementwise", "elementwise-chain", h.name, reason});
      continue;
    }
    FusionRecord rec{"fuse_elementwise", "elementwise-chain", h.name + ".fused", {}};
    for (int id : chain) rec.nodes.push_back(g.node(id).name);
    replace_node(g, chain, {running}, inputs, program, rec.fused_node, static_cast<size_t>(chain.back()));
    ctx.fusions.push_back(std::move(rec));
  }
}

void fuse_horizontal(ir::Graph& g, PassContext& ctx) {
  std::map<int, std::vector<int>> by_input;  // input 0 → single-output element-wise nodes
  for (int id : g.order()) {
    const ir::Node& n = g.node(id);
    const bool single = n.op == "elementwise" ? n.outputs.size() == 1 : is_elementwise(n.op);
    if (single) by_input[n.inputs[0]].push_back(id);
  }
  for (auto& [x, siblings] : by_input) {
    if (siblings.size() < 2) continue;
    const auto& order = g.order();
    auto position = [&](int node) { return std::find(order.begin(), order.end(), node) - order.begin(); };
    const auto first = position(siblings[0]);
    std::vector<int> inputs{x}, outputs;
    std::string programs;
    bool ready = true;
    for (int id : siblings) {
      const ir::Node& n = g.node(id);
      std::vector<std::string> steps =
          n.op == "elementwise" ? ops::parse_elementwise_programs(n.attrs.s("programs")).at(0)
                                : std::vector<std::string>{n.op == "relu" ? "relu" : "add:1"};
      std::vector<int> operands(n.inputs.begin() + 1, n.inputs.end());
      for (int op : operands) {
        const int p = g.value(op).producer;
        if (p >= 0 && position(p) > first) ready = false;
      }
      std::string prog;
      for (const std::string& s : steps) {
        if (!prog.empty()) prog += ",";
        if (s == "relu") {
          prog += "relu";
          continue;
        }
        inputs.push_back(operands.at(static_cast<size_t>(std::stoi(s.substr(4)) - 1)));
        prog += "add:" + std::to_string(inputs.size() - 1);
      }
      programs += (programs.empty() ? "" : ";") + prog;
      outputs.push_back(n.outputs[0]);
    }
    if (!ready) {
      ctx.rejections.push_back({"fuse_elementwise", "elementwise-siblings", g.node(siblings[0]).name,
                                "an operand of a sibling is computed after the first sibling runs"});
      continue;
    }
    FusionRecord rec{"fuse_elementwise", "elementwise-siblings", g.value(x).name + ".siblings", {}};
    for (int id : siblings) rec.nodes.push_back(g.node(id).name);
    replace_node(g, siblings, outputs, inputs, programs, rec.fused_node, static_cast<size_t>(siblings[0]));
    ctx.fusions.push_back(std::move(rec));
  }
}

}  // namespace

void fuse_elementwise(ir::Graph& g, PassContext& ctx) {
  fuse_vertical(g, ctx);
  fuse_horizontal(g, ctx);
}

}  // namespace trident::passes
