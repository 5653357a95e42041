// Builds the explain report by compiling twice (fusion passes on and off) without allocating
// buffers, so it is cheap even for VGG16-BN at ImageNet shapes.
#include "runtime/fusion_report.h"

#include <iomanip>
#include <sstream>

#include "ir/op_registry.h"
#include "ops/bn_relu_backward_stages.h"
#include "ops/conv_stages.h"

namespace trident::runtime {

int64_t kernel_launches(const ir::Graph& g, const plan::MemoryPlan& plan) {
  int64_t n = 0;
  for (int id : g.order())
    n += !plan.hoisted[id] && !ir::OpRegistry::get(g.node(id).op).view;
  return n;
}

int64_t activation_bytes_written(const ir::Graph& g, const plan::MemoryPlan& plan) {
  int64_t bytes = 0;
  for (int id : g.order()) {
    if (ir::OpRegistry::get(g.node(id).op).view) continue;
    for (int out : g.node(id).outputs)
      if (plan.placement[out].buffer == plan::Buffer::Arena)
        bytes += static_cast<int64_t>(plan.placement[out].bytes);
  }
  return bytes;
}

FusionReport explain(const std::string& model_name, const ir::Graph& model,
                     const passes::CompileOptions& options) {
  FusionReport r;
  r.model = model_name;
  r.mode = options.mode;
  r.fused = compile_graph(model, options);
  passes::CompileOptions plain = with_backend_traits(options);
  const passes::PassManager pipeline = passes::standard_pipeline(plain.mode, plain);
  for (const passes::Pass& p : pipeline.passes())
    if (p.fusion && std::find(plain.disabled_passes.begin(), plain.disabled_passes.end(), p.name) ==
                        plain.disabled_passes.end())
      plain.disabled_passes.push_back(p.name);
  plain.dump_dir.clear();
  r.unfused = compile_graph(model, plain);
  r.launches_fused = kernel_launches(r.fused.graph, r.fused.plan);
  r.launches_unfused = kernel_launches(r.unfused.graph, r.unfused.plan);
  r.bytes_fused = activation_bytes_written(r.fused.graph, r.fused.plan);
  r.bytes_unfused = activation_bytes_written(r.unfused.graph, r.unfused.plan);
  return r;
}

namespace {
std::string mib(int64_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << bytes / 1048576.0 << " MiB";
  return os.str();
}
// The fused convolutions the compiled graph runs, in execution order.
std::vector<int> fused_convolutions(const ir::Graph& g) {
  std::vector<int> out;
  for (int id : g.order())
    if (ops::ConvStages::is_fused_convolution(g.node(id).op)) out.push_back(id);
  return out;
}
// The fused batchnorm backwards (ops/bn_relu_backward_stages.h), in execution order.
std::vector<int> fused_batchnorm_backwards(const ir::Graph& g) {
  std::vector<int> out;
  for (int id : g.order())
    if (g.node(id).op == "batchnorm_relu_backward" || g.node(id).op == "cbr_weight_backward") out.push_back(id);
  return out;
}

}  // namespace

std::string report_text(const FusionReport& r) {
  std::ostringstream os;
  os << "model " << r.model << ", mode " << passes::mode_name(r.mode) << "\n";
  os << "nodes           " << r.unfused.graph.order().size() << " -> " << r.fused.graph.order().size() << "\n";
  os << "kernel launches " << r.launches_unfused << " -> " << r.launches_fused << "\n";
  os << "intermediates   " << mib(r.bytes_unfused) << " -> " << mib(r.bytes_fused)
     << " written per step; " << mib(r.bytes_unfused - r.bytes_fused)
     << " no longer written and re-read\n";
  os << "arena           " << mib(static_cast<int64_t>(r.unfused.plan.bytes(plan::Buffer::Arena))) << " -> "
     << mib(static_cast<int64_t>(r.fused.plan.bytes(plan::Buffer::Arena))) << "\n";
  os << "\nfused groups (" << r.fused.fusions.size() << "):\n";
  for (const auto& f : r.fused.fusions) {
    os << "  " << std::left << std::setw(20) << f.pattern << std::setw(34) << f.fused_node << " <= ";
    for (size_t i = 0; i < f.nodes.size(); ++i) os << (i ? " + " : "") << f.nodes[i];
    os << "\n";
  }
  os << "\nrefused candidates (" << r.fused.rejections.size() << "):\n";
  for (const auto& j : r.fused.rejections)
    os << "  " << std::left << std::setw(20) << j.pattern << std::setw(34) << j.node << " " << j.reason << "\n";
  const std::vector<int> convs = fused_convolutions(r.fused.graph);
  os << "\nfused convolutions and their stages (" << convs.size() << "):\n";
  for (int id : convs) {
    const ir::Node& n = r.fused.graph.node(id);
    os << "  " << std::left << std::setw(54) << n.name << " " << ops::ConvStages::of(n).describe() << "\n";
  }
  const std::vector<int> backwards = fused_batchnorm_backwards(r.fused.graph);
  if (!backwards.empty()) os << "\nfused batchnorm backwards and their stages (" << backwards.size() << "):\n";
  for (int id : backwards) {
    const ir::Node& n = r.fused.graph.node(id);
    os << "  " << std::left << std::setw(54) << n.name << " "
       << ops::BnReluBackwardStages::of(n, r.fused.graph).describe() << (n.op == "cbr_weight_backward" ? " → weight gradient" : "") << "\n";
  }
  return os.str();
}

nlohmann::json report_json(const FusionReport& r) {
  nlohmann::json fusions = nlohmann::json::array(), rejections = nlohmann::json::array();
  for (const auto& f : r.fused.fusions)
    fusions.push_back({{"pass", f.pass}, {"pattern", f.pattern}, {"fused_node", f.fused_node}, {"nodes", f.nodes}});
  for (const auto& j : r.fused.rejections)
    rejections.push_back({{"pass", j.pass}, {"pattern", j.pattern}, {"node", j.node}, {"reason", j.reason}});
  nlohmann::json convolutions = nlohmann::json::array();
  for (int id : fused_convolutions(r.fused.graph)) {
    const ir::Node& n = r.fused.graph.node(id);
    convolutions.push_back({{"node", n.name}, {"op", n.op}, {"stages", ops::ConvStages::of(n).describe()}});
  }
  nlohmann::json backwards = nlohmann::json::array();
  for (int id : fused_batchnorm_backwards(r.fused.graph)) {
    const ir::Node& n = r.fused.graph.node(id);
    backwards.push_back({{"node", n.name}, {"op", n.op}, {"stages", ops::BnReluBackwardStages::of(n, r.fused.graph).describe()}});
  }
  return {{"model", r.model},
          {"mode", passes::mode_name(r.mode)},
          {"nodes", {{"unfused", r.unfused.graph.order().size()}, {"fused", r.fused.graph.order().size()}}},
          {"kernel_launches", {{"unfused", r.launches_unfused}, {"fused", r.launches_fused}}},
          {"intermediate_bytes", {{"unfused", r.bytes_unfused}, {"fused", r.bytes_fused},
                                  {"saved", r.bytes_unfused - r.bytes_fused}}},
          {"arena_bytes", {{"unfused", r.unfused.plan.bytes(plan::Buffer::Arena)},
                           {"fused", r.fused.plan.bytes(plan::Buffer::Arena)}}},
          {"fusions", fusions},
          {"fused_convolutions", convolutions},
          {"fused_batchnorm_backwards", backwards},
          {"rejections", rejections}};
}

}  // namespace trident::runtime
