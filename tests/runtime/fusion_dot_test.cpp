// `trident explain --dot` (runtime/fusion_dot.cpp): ResNet-18's training graph drew 277 edges, 202
// of them distinct and 62 into sgd_update, with ten colours cycling over its groups and names
// that could break the DOT syntax. Now: one edge per pair, the optimizer's fan-in as a note,
// one colour per pattern with a legend, names escaped.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "frontend/builder.h"
#include "frontend/zoo.h"
#include "runtime/fusion_report.h"

namespace trident {
namespace {

runtime::FusionReport train_report(const std::string& name, const ir::Graph& model) {
  passes::CompileOptions o;
  o.mode = passes::Mode::Train;
  return runtime::explain(name, model, o);
}

TEST(FusionDot, OneEdgePerPairAndTheOptimizerAsANote) {
  const runtime::FusionReport r = train_report("resnet18", frontend::build_model("resnet18", {2}));
  const std::string dot = runtime::report_dot(r);
  const std::regex edge(R"(  (n\d+) -> (n\d+) \[label="\[[0-9,]*\]( \+\d+)?"\];)");
  std::set<std::pair<std::string, std::string>> pairs;
  int edges = 0;
  for (auto it = std::sregex_iterator(dot.begin(), dot.end(), edge); it != std::sregex_iterator(); ++it) {
    ++edges;
    EXPECT_TRUE(pairs.insert({(*it)[1], (*it)[2]}).second) << "a second edge " << (*it)[0];
  }
  EXPECT_GT(edges, 100);
  // The sgd_update node says how much it reads and has no edge into it.
  const std::smatch opt = [&] {
    std::smatch m;
    std::regex_search(dot, m, std::regex(R"(  (n\d+) \[label="[^"]*\\nsgd_update\\n\(reads (\d+) tensors\))"));
    return m;
  }();
  ASSERT_FALSE(opt.empty()) << dot.substr(0, 2000);
  EXPECT_GT(std::stoi(opt[2]), 60);
  EXPECT_EQ(dot.find("-> " + std::string(opt[1]) + " "), std::string::npos);
  // Colours follow the patterns, and the legend names them.
  EXPECT_NE(dot.find("subgraph cluster_legend"), std::string::npos);
  EXPECT_NE(dot.find("[label=\"conv-bn-relu\""), std::string::npos);
  EXPECT_NE(dot.find("[label=\"conv-bn-add-relu\""), std::string::npos);
}

TEST(FusionDot, NamesAreEscaped) {
  ir::Graph g;
  frontend::Builder b(g);
  int x = g.add_input("images", {2, 8, 8, 3});
  x = b.cbr(x, 4, 3, 1, 1, "conv \"one\" \\ two");
  x = b.linear(b.flatten(b.global_avgpool(x, "pool"), "flat"), 10, true, "fc");
  g.mark_output(x);
  const std::string dot = runtime::report_dot(train_report("a \"quoted\" model", g));
  EXPECT_NE(dot.find("digraph \"a \\\"quoted\\\" model\""), std::string::npos) << dot.substr(0, 200);
  EXPECT_NE(dot.find("conv \\\"one\\\" \\\\ two"), std::string::npos);
  // Every line holds an even number of unescaped quotes: no name ends a string early.
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    int quotes = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\\') ++i;  // the escaped character
      else if (line[i] == '"') ++quotes;
    }
    EXPECT_EQ(quotes % 2, 0) << line;
  }
}

}  // namespace
}  // namespace trident
