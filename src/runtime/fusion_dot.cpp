// `trident explain --dot`: the fused graph as a Graphviz picture a person can read. One edge per
// producer–consumer pair, labelled with the shape it carries; the optimizer's fan-in (every
// gradient into sgd_update) and the parameter plumbing (the weight casts that feed every
// layer) are drawn as notes on their nodes instead of as hundreds of edges; one colour per
// fusion pattern, with a legend; every name escaped, so a name holding quotes stays valid DOT.
#include <map>
#include <set>
#include <sstream>

#include "ops/optimizer_params.h"
#include "runtime/fusion_report.h"

namespace trident::runtime {

namespace {

// A DOT string literal's contents.
std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

std::string shape_label(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

bool is_optimizer(const ir::Node& n) { return ops::is_optimizer_op(n.op); }

// A node that reads only parameters (a weight's reduced-precision copy, the casts of all of
// them in one group): its edges go to nearly every layer, so it is drawn alone with a note.
bool is_parameter_plumbing(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.empty()) return false;
  for (int v : n.inputs)
    if (g.value(v).role != ir::ValueRole::Parameter) return false;
  return n.op == "cast" || n.op == "cast_group";
}

}  // namespace

std::string report_dot(const FusionReport& r) {
  static const char* kColours[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
                                   "#b3de69", "#fccde5", "#bc80bd", "#ccebc5", "#ffed6f", "#d9d9d9"};
  const ir::Graph& g = r.fused.graph;
  // Each fused node's patterns, in the order the passes made them; the first gives its colour.
  std::map<std::string, std::vector<std::string>> patterns_of;
  std::map<std::string, int> colour_of;  // pattern -> colour index, in order of first use
  for (const passes::FusionRecord& f : r.fused.fusions) {
    patterns_of[f.fused_node].push_back(f.pattern);
    colour_of.emplace(f.pattern, static_cast<int>(colour_of.size()));
  }
  const auto colour = [&](const std::string& pattern) { return kColours[colour_of.at(pattern) % 12]; };
  const auto users = g.users();

  std::ostringstream os;
  os << "digraph \"" << escaped(r.model) << "\" {\n  rankdir=TB;\n"
     << "  node [shape=box, style=\"rounded,filled\", fontname=Helvetica, fontsize=10];\n"
     << "  edge [fontname=Helvetica, fontsize=8, color=\"#555555\"];\n";
  std::set<int> drawn;
  for (int id : g.order()) {
    const ir::Node& n = g.node(id);
    std::string label = escaped(n.name) + "\\n" + escaped(n.op);
    const auto p = patterns_of.find(n.name);
    if (p != patterns_of.end() && p->second.size() > 1) {
      label += "\\n+";
      for (size_t i = 1; i < p->second.size(); ++i) label += (i > 1 ? ", " : " ") + escaped(p->second[i]);
    }
    if (is_optimizer(n)) label += "\\n(reads " + std::to_string(n.inputs.size()) + " tensors)";
    if (is_parameter_plumbing(g, n)) {
      std::set<int> readers;
      for (int v : n.outputs)
        for (int u : users[v]) readers.insert(u);
      label += "\\n(feeds " + std::to_string(readers.size()) + " nodes)";
    }
    const std::string fill = p != patterns_of.end() ? colour(p->second.front()) : "#f0f0f0";
    os << "  n" << id << " [label=\"" << label << "\", fillcolor=\"" << fill << "\"];\n";
    if (is_optimizer(n)) os << "  { rank=sink; n" << id << "; }\n";  // last, not beside the inputs
    drawn.insert(id);
  }
  // One edge per producer-consumer pair, labelled with the first value's shape.
  std::map<std::pair<int, int>, std::pair<int, int>> edges;  // (from, to) -> (first value, count)
  for (int id : g.order()) {
    const ir::Node& n = g.node(id);
    if (is_optimizer(n)) continue;
    for (int v : n.inputs) {
      const int from = g.value(v).producer;
      if (from < 0 || !drawn.count(from) || is_parameter_plumbing(g, g.node(from))) continue;
      auto [it, fresh] = edges.try_emplace({from, id}, v, 0);
      ++it->second.second;
    }
  }
  for (const auto& [pair, value] : edges) {
    std::string label = shape_label(g.value(value.first).shape);
    if (value.second > 1) label += " +" + std::to_string(value.second - 1);
    os << "  n" << pair.first << " -> n" << pair.second << " [label=\"" << label << "\"];\n";
  }
  if (!colour_of.empty()) {
    os << "  subgraph cluster_legend {\n    label=\"fusion patterns\";\n    fontname=Helvetica;\n";
    for (const auto& [pattern, index] : colour_of)
      os << "    legend" << index << " [label=\"" << escaped(pattern) << "\", fillcolor=\"" << colour(pattern)
         << "\"];\n";
    os << "  }\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace trident::runtime
