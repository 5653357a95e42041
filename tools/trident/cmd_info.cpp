// `trident info`: a model's layer table, parameter count, forward multiply-accumulates, and
// the memory plan (arena size against the sum of all intermediate tensors) for a mode.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "compile_flags.h"
#include "frontend/zoo.h"
#include "ir/op_registry.h"
#include "runtime/default_batch.h"
#include "runtime/executable.h"

namespace trident::cli {

namespace {

struct Options {
  std::string model = frontend::default_model();
  int64_t batch = 0;  // 0: the batch of --mode (runtime/default_batch.h)
  std::string mode = "train";
  bool json = false;
  bool list = false;
};

std::string mib(size_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << bytes / 1048576.0 << " MiB";
  return os.str();
}

int run_info(const Options& o) {
  if (o.list) {
    for (const auto& m : frontend::model_list())
      std::cout << std::left << std::setw(14) << m.name << m.summary << "\n";
    return 0;
  }
  const int64_t batch = o.batch > 0 ? o.batch : runtime::default_batch(o.mode != "infer");
  ir::Graph g = frontend::build_model(o.model, {batch});
  nlohmann::json layers = nlohmann::json::array();
  int64_t params = 0, macs = 0;
  for (int v : g.values_with_role(ir::ValueRole::Parameter)) params += numel(g.value(v).shape);
  for (int nid : g.order()) {
    const ir::Node& n = g.node(nid);
    int64_t p = 0;
    for (int in : n.inputs)
      if (g.value(in).role == ir::ValueRole::Parameter) p += numel(g.value(in).shape);
    const int64_t m = ir::OpRegistry::get(n.op).macs(n, g);
    macs += m;
    layers.push_back({{"name", n.name}, {"op", n.op}, {"output", g.value(n.outputs[0]).shape},
                      {"params", p}, {"macs", m}});
  }
  passes::CompileOptions opt;
  opt.mode = o.mode == "infer" ? passes::Mode::Infer : passes::Mode::Train;
  runtime::CompiledGraph c = runtime::compile_graph(g, opt);
  const auto& plan = c.plan;
  nlohmann::json memory = {{"mode", o.mode},
                           {"nodes", c.graph.order().size()},
                           {"arena_bytes", plan.bytes(plan::Buffer::Arena)},
                           {"intermediate_bytes_unshared", plan.arena_unshared_bytes},
                           {"param_bytes", plan.bytes(plan::Buffer::Params)},
                           {"grad_bytes", c.param_grads.empty() ? 0 : plan.bytes(plan::Buffer::Grads)},
                           {"state_bytes", plan.bytes(plan::Buffer::State)}};
  if (o.json) {
    nlohmann::json out = {{"model", o.model}, {"batch", batch},     {"input", g.value(0).shape},
                          {"params", params}, {"forward_macs", macs}, {"layers", layers},
                          {"memory", memory}};
    std::cout << out.dump() << "\n";
    return 0;
  }
  std::cout << "model " << o.model << ", input " << shape_str(g.value(0).shape) << "\n\n";
  std::cout << std::left << std::setw(34) << "layer" << std::setw(16) << "op" << std::setw(20)
            << "output" << std::right << std::setw(12) << "params" << std::setw(16) << "MACs" << "\n";
  for (const auto& l : layers)
    std::cout << std::left << std::setw(34) << l["name"].get<std::string>() << std::setw(16)
              << l["op"].get<std::string>() << std::setw(20)
              << shape_str(l["output"].get<Shape>()) << std::right << std::setw(12)
              << l["params"].get<int64_t>() << std::setw(16) << l["macs"].get<int64_t>() << "\n";
  std::cout << "\nparameters      " << params << " (" << std::fixed << std::setprecision(2)
            << params / 1e6 << " M)\n";
  std::cout << "forward MACs    " << macs << " (" << macs / 1e9 << " G per batch of " << batch << ")\n";
  std::cout << "memory plan (" << o.mode << ", " << c.graph.order().size() << " nodes): arena "
            << mib(plan.bytes(plan::Buffer::Arena)) << " for " << mib(plan.arena_unshared_bytes)
            << " of intermediate tensors; parameters " << mib(plan.bytes(plan::Buffer::Params))
            << ", state " << mib(plan.bytes(plan::Buffer::State)) << "\n";
  return 0;
}

}  // namespace

RunSubcommand add_info_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("info", "Layer table, parameters, MACs and memory plan of a model");
  sub->add_option("--model", o->model, "Model name (see --list)")->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch size (default: as the mode's command, 64 for train, 1 for infer)")
      ->check(within(runtime::kBatchLimit));
  sub->add_option("--mode", o->mode, "Plan memory for train or infer")
      ->check(CLI::IsMember({"train", "infer"}))->capture_default_str();
  sub->add_flag("--json", o->json, "Print one JSON object instead of a table");
  sub->add_flag("--list", o->list, "List the models of the zoo");
  return [o] { return run_info(*o); };
}

}  // namespace trident::cli
