// Benchmark (not a test): one Conv3x3+BatchNorm+ReLU layer, fused vs unfused, for a training
// step (forward+backward) and for inference, on one backend. Prints one JSON line per
// measurement (whole step, and the CBR layer's own nodes via run_profiled) plus a ratio line.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "frontend/builder.h"
#include "runtime/executable.h"

namespace {

namespace passes = trident::passes;
using trident::runtime::Executable;
using json = nlohmann::json;

struct Config {
  int64_t n = 32, h = 56, w = 56, c = 64, k = 64;
  std::string backend = "cpu";
  int iters = 20, warmup = 3, threads = 0;
  bool sgd = false;    // include the optimizer update in the training step
  bool nodes = false;  // also print one line per node (where the time goes)
  std::vector<std::string> modes{"train", "infer"};
  uint64_t seed = 1;
};

// "Unfused" turns off each of these that exists in the mode's pipeline.
const std::vector<std::string> kFusionPasses = {"fuse_conv_bn_relu", "fuse_bn_relu", "fold_bn", "fuse_conv_epilogue",
                                                "fuse_elementwise"};

// Which part of the network a node belongs to, read from the names the builder and the passes
// give: "cbr.*" is the layer (its forward nodes, the fused "cbr.conv.cbr", their ".backward",
// ".dgrad", ".wgrad" and ".fused" nodes), "head.*" the pooling+linear head, the rest is loss,
// gradient sums and the optimizer.
enum class Part { Layer, Head, Other };
Part part_of(const std::string& name) {
  if (name.rfind("cbr.", 0) == 0) return Part::Layer;
  if (name.rfind("head.", 0) == 0) return Part::Head;
  return Part::Other;
}
const char* part_name(Part p) { return p == Part::Layer ? "layer" : p == Part::Head ? "head" : "other"; }

trident::ir::Graph build_model(const Config& cfg) {
  trident::ir::Graph g;
  trident::frontend::Builder b(g);
  int x = b.input("images", {cfg.n, cfg.h, cfg.w, cfg.c});
  x = b.cbr(x, cfg.k, 3, 1, 1, "cbr");
  b.push("head");
  x = b.flatten(b.global_avgpool(x, "avgpool"), "flatten");
  x = b.linear(x, 10, true, "fc");
  b.pop();
  g.mark_output(x);
  return g;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct Variant {
  std::string name;  // "fused" or "unfused"
  std::vector<std::string> disabled;
  std::unique_ptr<Executable> exe;
  std::vector<Part> step_part;         // by step index (hoisted nodes are not steps)
  std::vector<std::string> step_name, step_op;
  std::vector<double> step_ms, layer_ms, head_ms, other_ms;
  std::vector<std::vector<double>> node_ms;  // [step][iteration]
};

void compile_variant(Variant& v, const trident::ir::Graph& model, const Config& cfg, passes::Mode mode) {
  passes::CompileOptions opt;
  opt.mode = mode;
  opt.backend = cfg.backend;
  opt.optimizer = cfg.sgd;
  if (v.name == "unfused") {
    const passes::PassManager pipeline = passes::standard_pipeline(mode, opt);
    for (const passes::Pass& p : pipeline.passes())
      if (std::find(kFusionPasses.begin(), kFusionPasses.end(), p.name) != kFusionPasses.end())
        v.disabled.push_back(p.name);
  }
  opt.disabled_passes = v.disabled;
  v.exe = Executable::compile(model, opt);
  v.exe->init_parameters(cfg.seed);

  // Inputs: normal images, labels spread over the classes, a small learning rate.
  trident::Rng rng(cfg.seed);
  trident::TensorView img = v.exe->find("images");
  for (int64_t i = 0; i < img.numel(); ++i) img.as<float>()[i] = static_cast<float>(rng.normal());
  if (v.exe->has("labels")) {
    trident::TensorView lab = v.exe->find("labels");
    for (int64_t i = 0; i < lab.numel(); ++i) lab.as<int32_t>()[i] = static_cast<int32_t>(i % 10);
  }
  if (v.exe->has("lr")) v.exe->find("lr").as<float>()[0] = 1e-3f;

  const trident::ir::Graph& g = v.exe->graph();
  for (int nid : g.order()) {
    if (v.exe->memory_plan().hoisted[nid]) continue;
    v.step_part.push_back(part_of(g.node(nid).name));
    v.step_name.push_back(g.node(nid).name);
    v.step_op.push_back(g.node(nid).op);
  }
  v.node_ms.assign(v.step_part.size(), {});
}

// Whole step with run(); then the same number of profiled steps for the per-part split.
void measure_once(Variant& v, bool profiled) {
  using clock = std::chrono::steady_clock;
  if (!profiled) {
    const auto t0 = clock::now();
    v.exe->run();
    v.step_ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
    return;
  }
  std::vector<double> secs;
  v.exe->run_profiled(secs);
  double part[3] = {0, 0, 0};
  for (size_t i = 0; i < secs.size(); ++i) {
    part[static_cast<int>(v.step_part[i])] += secs[i] * 1e3;
    v.node_ms[i].push_back(secs[i] * 1e3);
  }
  v.layer_ms.push_back(part[0]);
  v.head_ms.push_back(part[1]);
  v.other_ms.push_back(part[2]);
}

int run(const Config& cfg) {
  if (cfg.threads > 0) omp_set_num_threads(cfg.threads);
  const trident::ir::Graph model = build_model(cfg);
  const json shape = {cfg.n, cfg.h, cfg.w, cfg.c, cfg.k};
  json ratios = {{"bench", "cbr_layer_ratios"}, {"backend", cfg.backend}, {"shape", shape},
                 {"threads", omp_get_max_threads()}, {"note", "unfused / fused; > 1 means fusion is faster"}};
  for (const std::string& mode_str : cfg.modes) {
    const passes::Mode mode = mode_str == "train" ? passes::Mode::Train : passes::Mode::Infer;
    Variant vs[2];
    vs[0].name = "fused";
    vs[1].name = "unfused";
    for (Variant& v : vs) compile_variant(v, model, cfg, mode);
    // Warm-up, then the variants alternate step by step so that both see the same machine.
    for (int i = 0; i < cfg.warmup; ++i)
      for (Variant& v : vs) v.exe->run();
    for (bool profiled : {false, true})
      for (int i = 0; i < cfg.iters; ++i)
        for (Variant& v : vs) measure_once(v, profiled);

    double med[2][2];  // [variant][step, layer]
    for (int vi = 0; vi < 2; ++vi) {
      Variant& v = vs[vi];
      med[vi][0] = median(v.step_ms);
      med[vi][1] = median(v.layer_ms);
      std::cout << json{{"bench", "cbr_layer"},
                        {"mode", mode_str},
                        {"variant", v.name},
                        {"backend", cfg.backend},
                        {"shape", shape},
                        {"threads", omp_get_max_threads()},
                        {"sgd", mode == passes::Mode::Train && cfg.sgd},
                        {"disabled_passes", v.disabled},
                        {"iters", cfg.iters},
                        {"median_ms", med[vi][0]},
                        {"min_ms", *std::min_element(v.step_ms.begin(), v.step_ms.end())},
                        {"layer_ms", med[vi][1]},
                        {"head_ms", median(v.head_ms)},
                        {"other_ms", median(v.other_ms)},
                        {"layer_steps", std::count(v.step_part.begin(), v.step_part.end(), Part::Layer)},
                        {"images_per_s", cfg.n / (med[vi][0] * 1e-3)}}
                       .dump()
                << std::endl;
      if (cfg.nodes)
        for (size_t i = 0; i < v.step_part.size(); ++i)
          std::cout << json{{"bench", "cbr_node"}, {"mode", mode_str}, {"variant", v.name},
                            {"step", i}, {"node", v.step_name[i]}, {"op", v.step_op[i]},
                            {"part", part_name(v.step_part[i])}, {"median_ms", median(v.node_ms[i])}}
                           .dump()
                    << std::endl;
    }
    ratios[mode_str + "_step"] = med[1][0] / med[0][0];
    ratios[mode_str + "_layer"] = med[1][1] / med[0][1];
  }
  std::cout << ratios.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{"trident_bench_cbr: one Conv3x3+BN+ReLU layer, fused vs unfused, train and infer"};
  std::vector<int64_t> shape;
  app.add_option("--shape", shape, "N,H,W,C,K (default 32,56,56,64,64)")->delimiter(',')->expected(5);
  app.add_option("--n", cfg.n, "Batch")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--hw", cfg.h, "Height = width")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--c", cfg.c, "Input channels")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--k", cfg.k, "Output channels")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--backend", cfg.backend, "Backend (cpu, cpu_ref)")->capture_default_str();
  app.add_option("--iters", cfg.iters, "Timed steps per variant")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--warmup", cfg.warmup, "Untimed steps first")->check(CLI::Range(0, 100000))->capture_default_str();
  app.add_option("--threads", cfg.threads, "OpenMP threads (default: all cores)")->check(CLI::Range(1, 1024));
  app.add_option("--modes", cfg.modes, "train, infer or both")->delimiter(',')
      ->check(CLI::IsMember({"train", "infer"}))->capture_default_str();
  app.add_flag("--sgd", cfg.sgd, "Include the SGD update in the training step");
  app.add_flag("--nodes", cfg.nodes, "Also print each node's median time");
  app.add_option("--seed", cfg.seed, "Seed for weights and inputs")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!shape.empty()) {
    cfg.n = shape[0], cfg.h = shape[1], cfg.w = shape[2], cfg.c = shape[3], cfg.k = shape[4];
    for (int64_t s : shape)
      if (s < 1) {
        std::cerr << "trident_bench_cbr: error: --shape needs five positive numbers\n";
        return 1;
      }
  } else {
    cfg.w = cfg.h;
  }
  try {
    return run(cfg);
  } catch (const trident::Error& e) {
    std::cerr << "trident_bench_cbr: error: " << e.what() << "\n";
    return 1;
  }
}
