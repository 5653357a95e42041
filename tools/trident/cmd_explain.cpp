// `trident explain`: what the fusion passes did to a model and why they refused the rest;
// --json for machines, --dot FILE for a picture of the fused graph. Accepts an ONNX file too.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "compile_flags.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/zoo.h"
#include "runtime/default_batch.h"
#include "runtime/executable.h"
#include "runtime/fusion_report.h"

namespace trident::cli {

namespace {

struct Options {
  std::string model = frontend::default_model();
  std::string model_file;  // positional MODEL.onnx
  std::string mode = "train";
  bool mode_given = false;
  int64_t batch = 0;  // 0: the batch of --mode (runtime/default_batch.h)
  bool json = false;
  std::string dot;
  passes::CompileOptions compile;
  DeviceFlags device;
  ThreadFlags threads;  // the CPU kernels explain builds (and times) to say how each one runs
};

int run_explain(Options o) {
  o.threads.apply();
  if (!o.model_file.empty()) o.model = o.model_file;
  const bool onnx = o.model.size() > 5 && o.model.ends_with(".onnx");
  if (onnx && !o.mode_given) o.mode = "infer";  // an exported model is an inference graph
  passes::CompileOptions& opt = o.compile;
  opt.mode = o.mode == "infer" ? passes::Mode::Infer : passes::Mode::Train;
  if (o.batch == 0) o.batch = runtime::default_batch(opt.mode == passes::Mode::Train);
  // An ONNX model explained for training is imported as train imports it (batchnorms in training form).
  frontend::OnnxOptions import;
  import.batch = o.batch;
  import.train = opt.mode == passes::Mode::Train;
  ir::Graph model;
  if (onnx) {
    frontend::OnnxImport imp = frontend::import_onnx(o.model, import);
    // What the import changed (a folded batch norm, above all) comes before the report.
    for (const std::string& notice : imp.notices) std::cerr << "trident: notice: " << notice << "\n";
    model = std::move(imp.graph);
  } else {
    model = frontend::build_model(o.model, {o.batch});
  }
  // The report is made for the pipeline of the device asked for. --device cuda on a machine
  // without a usable GPU still compiles the graph for the cuda pipeline (no kernels are built).
  std::string no_gpu;
  const std::string device = device_choice(o.device);
  const bool on_cpu = device != "cuda" && device != "auto";
  if (!on_cpu) {
    try {
      opt.backend = resolve_device(o.device);
    } catch (const Error& e) {
      if (device != "cuda") throw;
      no_gpu = e.what();
      opt.backend = "cuda";
    }
    opt.precision = precision_dtype(o.device);
  }
  runtime::FusionReport r = runtime::explain(o.model, model, opt);
  // With a device, or for an inference graph on the CPU, the kernels are built too, and those
  // that chose a way to run say which (on the GPU: one cuDNN graph, or a convolution plus a
  // fused element-wise kernel; on the CPU: Winograd or the direct convolution).
  std::vector<std::pair<std::string, std::string>> kernels;
  const bool build = no_gpu.empty() && (!on_cpu || opt.mode == passes::Mode::Infer);
  if (build) {
    if (on_cpu) opt.backend = resolve_device(o.device);
    opt.dump_dir.clear();
    kernels = runtime::Executable::compile(model, opt, o.device.backend_options)->kernel_implementations();
  }
  if (!o.dot.empty()) {
    const std::string dot = runtime::report_dot(r);
    write_file_atomically(o.dot, dot.data(), dot.size());
  }
  if (o.json) {
    nlohmann::json j = runtime::report_json(r);
    j["pipeline"] = opt.backend;
    if (!no_gpu.empty()) j["kernels_not_built"] = no_gpu;
    if (build) {
      j["backend"] = opt.backend;
      j["kernels"] = nlohmann::json::array();
      for (const auto& [node, how] : kernels) j["kernels"].push_back({{"node", node}, {"implementation", how}});
    }
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << runtime::report_text(r);
  if (!no_gpu.empty()) std::cout << "\nkernels not built: " << no_gpu << "\n";
  if (build) {
    std::cout << "\nkernels on backend " << opt.backend << " that chose how to run (" << kernels.size() << "):\n";
    for (const auto& [node, how] : kernels) std::cout << "  " << node << ": " << how << "\n";
  }
  return 0;
}

}  // namespace

RunSubcommand add_explain_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("explain", "Show what was fused, what was refused and why");
  sub->add_option("onnx", o->model_file, "MODEL.onnx to explain instead of a zoo model");
  sub->add_option("--model", o->model, "Model name (trident info --list) or an .onnx file")->capture_default_str();
  sub->add_option("--mode", o->mode, "train or infer (default for ONNX: infer)")->check(CLI::IsMember({"train", "infer"}))
      ->capture_default_str()->each([o](const std::string&) { o->mode_given = true; });
  sub->add_option("--batch", o->batch, "Batch size for the byte counts (default: as the mode's command, 64 for train, 1 for infer)")
      ->check(within(runtime::kBatchLimit));
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->add_option("--dot", o->dot, "Write a Graphviz picture of the fused graph to FILE");
  add_device_options(sub, o->device);
  add_thread_options(sub, o->threads);
  add_winograd_option(sub, o->device);
  add_plan_cache_option(sub, o->device);
  add_compile_flags(sub, o->compile);
  return [o] { return run_explain(*o); };
}

}  // namespace trident::cli
