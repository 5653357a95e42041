// elementwise: a fused chain of element-wise ops, written as a tiny program so one op covers
// every chain the fuse_elementwise pass forms. Each output has its own program, run on the
// running value that starts as input 0; steps are "relu" or "add:K" (add input K). Several
// outputs share input 0 when siblings are fused horizontally, so that input is read once.
//   programs = "add:1,relu"        one output: relu(x0 + x1)
//   programs = "relu;add:1"        two outputs: relu(x0) and x0 + x1
#include <sstream>

#include "ops/elementwise_program.h"
#include "ops/op_helpers.h"

namespace trident::ops {

std::vector<std::vector<std::string>> parse_elementwise_programs(const std::string& text) {
  std::vector<std::vector<std::string>> programs;
  std::stringstream outs(text);
  std::string program;
  while (std::getline(outs, program, ';')) {
    std::vector<std::string> steps;
    std::stringstream ss(program);
    std::string step;
    while (std::getline(ss, step, ',')) steps.push_back(step);
    programs.push_back(steps);
  }
  return programs;
}

void register_elementwise_fused_ops() {
  ir::OpDef ew = op_def("elementwise", {"x0", "operands..."}, {"y..."},
                        "a fused chain of relu/add steps per output, reading input 0 once");
  ew.variadic = true;
  ew.infer = [](const Node& n, const Graph& g) {
    if (n.inputs.empty()) throw Error("needs at least one input");
    const auto& x = in_value(g, n, 0);
    std::vector<TypeInfo> out;
    for (const auto& prog : parse_elementwise_programs(n.attrs.s("programs"))) {
      if (prog.empty()) throw Error("an empty program in attribute 'programs'");
      for (const std::string& step : prog) {
        if (step == "relu") continue;
        if (step.rfind("add:", 0) != 0) throw Error("unknown step '" + step + "' (relu, add:K)");
        const int k = std::stoi(step.substr(4));
        if (k < 1 || k >= static_cast<int>(n.inputs.size()))
          throw Error("step '" + step + "' names an input that does not exist");
        expect_same_shape(x, in_value(g, n, static_cast<size_t>(k)), "add operands");
      }
      out.push_back({x.shape, x.dtype});
    }
    return out;
  };
  ew.decompose = [](Graph& g, const Node& n) {
    std::vector<int> outs;
    for (const auto& prog : parse_elementwise_programs(n.attrs.s("programs"))) {
      int v = n.inputs[0];
      for (const std::string& step : prog)
        v = step == "relu" ? g.add_node1("relu", {v}, {}, n.name + ".relu")
                           : g.add_node1("add", {v, n.inputs[std::stoi(step.substr(4))]}, {}, n.name + ".add");
      outs.push_back(v);
    }
    return outs;
  };
  ir::OpRegistry::add(ew);
}

}  // namespace trident::ops
