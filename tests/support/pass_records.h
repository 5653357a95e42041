// Test support for pass tests: run a mode's standard pipeline over a model and keep the graph
// with the fusions and refusals one pass recorded, so a test can check what the pass did and
// why it refused the rest without building any kernel.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "passes/pass.h"
#include "runtime/executable.h"

namespace trident::test_support {

struct PassRecords {
  ir::Graph graph;
  std::vector<passes::FusionRecord> fusions;
  std::vector<passes::Rejection> rejections;
};

inline PassRecords run_pipeline(ir::Graph model, const passes::CompileOptions& given, const std::string& pass) {
  PassRecords r{std::move(model), {}, {}};
  const passes::CompileOptions opt = runtime::with_backend_traits(given);
  passes::PassContext ctx(opt);
  passes::standard_pipeline(opt.mode, opt).run(r.graph, ctx);
  for (const auto& f : ctx.fusions)
    if (f.pass == pass) r.fusions.push_back(f);
  for (const auto& j : ctx.rejections)
    if (j.pass == pass) r.rejections.push_back(j);
  return r;
}

}  // namespace trident::test_support
