// `trident export`: the trained model out of trident — a standard ONNX file (opset 17, NCHW
// input like PyTorch's, batchnorm kept or folded) or a PyTorch state dict in safetensors that
// `model.load_state_dict` accepts. The weights come from a checkpoint or state dict, from the
// ONNX file itself, or (with a notice) from --seed.
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "compile_flags.h"
#include "core/error.h"
#include "frontend/model_source.h"
#include "frontend/onnx/onnx_export.h"
#include "frontend/torch_layout.h"
#include "frontend/zoo.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/weight_file.h"
#include "runtime/executable.h"

namespace trident::cli {

namespace {

struct Options {
  std::string weights_positional, weights, model = frontend::default_model(), output, format;
  bool fold_bn = false, json = false;
  bool model_given = false;  // --model on the command line: a checkpoint's own model is not used
  uint64_t seed = 0;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string output_format(const Options& o) {
  if (!o.format.empty()) return o.format;
  if (ends_with(o.output, ".onnx")) return "onnx";
  if (ends_with(o.output, ".safetensors")) return "torch";
  throw Error("--output '" + o.output + "' ends in neither .onnx nor .safetensors; say which with --format onnx|torch");
}

int run_export(Options o) {
  if (!o.weights_positional.empty() && !o.weights.empty())
    throw Error("give the weights once: either CHECKPOINT or --weights, not both");
  if (o.weights.empty()) o.weights = o.weights_positional;
  const std::string format = output_format(o);
  if (o.fold_bn && format != "onnx") throw Error("--fold-bn applies to ONNX export only; a state dict keeps batchnorm");

  // A checkpoint names the model it trained, with the extents an image folder gave it: exported
  // as that model unless --model says otherwise.
  frontend::ModelConfig extents{1};
  std::string recorded_crc;
  if (!o.model_given && !o.weights.empty()) {
    runtime::Metadata md;
    runtime::read_safetensors(o.weights, &md);
    const auto format = md.find("format");
    if (format != md.end() && format->second == runtime::kCheckpointFormat) {
      const runtime::CheckpointInfo i = runtime::load_checkpoint(o.weights).info;
      o.model = i.model;
      extents = {1, i.height, i.width, i.channels, i.classes};
      recorded_crc = i.model_crc;
    }
  }
  frontend::LoadedModel loaded = frontend::load_model(o.model, extents, false);
  for (const std::string& notice : loaded.notices) std::cerr << "trident: notice: " << notice << "\n";
  if (!recorded_crc.empty()) {
    char crc[9];
    std::snprintf(crc, sizeof crc, "%08x", loaded.file_crc);
    if (recorded_crc != crc)
      throw Error("the model file '" + loaded.path + "' changed since checkpoint '" + o.weights +
                  "' was written (its CRC-32C is " + crc + ", the run's was " + recorded_crc +
                  "); export with the file the run trained, or name another with --model");
  }
  ir::Graph model = std::move(loaded.graph);
  runtime::WeightMap weights = std::move(loaded.weights);
  std::string source = weights.empty() ? "" : "the ONNX file";
  int64_t steps = 0;
  if (!o.weights.empty()) {
    runtime::WeightFile file = runtime::read_weight_file(o.weights, model);
    for (auto& [name, t] : file.weights) weights[name] = std::move(t);
    steps = file.steps;
    source = "'" + o.weights + "' (" + file.layout + ")";
  } else if (source.empty()) {
    passes::CompileOptions c = runtime::default_compile_options(passes::Mode::Infer);
    c.backend = "cpu_ref";
    auto exe = runtime::Executable::compile(model, c);
    exe->init_parameters(o.seed);
    weights = exe->export_weights();
    source = "random initial values (seed " + std::to_string(o.seed) + ")";
    std::cerr << "trident: notice: no weights given: exporting the model's " << source << "\n";
  }

  nlohmann::json result = {{"model", o.model}, {"weights", source}, {"format", format}, {"output", o.output}};
  if (format == "onnx") {
    frontend::OnnxExportOptions opt;
    opt.fold_bn = o.fold_bn;
    opt.model_name = o.model;
    const frontend::OnnxExportSummary s = frontend::export_onnx(model, weights, opt, o.output);
    result["nodes"] = s.nodes;
    result["initializers"] = s.initializers;
    result["folded_batchnorms"] = s.folded_batchnorms;
    result["opset"] = opt.opset;
  } else {
    const frontend::TorchLayout layout = frontend::torch_layout(model);
    const runtime::WeightMap state = frontend::to_torch_state_dict(layout, weights, steps);
    runtime::write_safetensors(o.output, state, {{"format", "pt"}});
    result["tensors"] = state.size();
  }
  if (o.json) {
    std::cout << result.dump() << "\n";
  } else {
    std::cout << "wrote " << o.output << " (" << (format == "onnx" ? "ONNX, opset 17" : "PyTorch state dict") << ") from "
              << o.model << " with " << source << "\n";
  }
  return 0;
}

}  // namespace

RunSubcommand add_export_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "export", "Write a model and its weights as ONNX (opset 17, NCHW) or as a PyTorch state dict (safetensors)");
  sub->add_option("checkpoint", o->weights_positional,
                  "The weights: a training checkpoint or a PyTorch state dict (same as --weights)");
  sub->add_option("--weights", o->weights, "The weights (default: the ONNX file's, else random from --seed)");
  CLI::Option* model = sub->add_option(
      "--model", o->model,
      "Zoo model name or an .onnx file (default: the model a checkpoint names, else " + frontend::default_model() + ")");
  sub->add_option("--output", o->output, "The file to write (.onnx or .safetensors)")->required();
  sub->add_option("--format", o->format, "onnx or torch (default: from --output's extension)")
      ->check(CLI::IsMember({"onnx", "torch"}));
  sub->add_flag("--fold-bn", o->fold_bn, "ONNX: fold each batchnorm into the convolution before it");
  add_seed_option(sub, o->seed, "Seed for random weights when none are given");
  sub->add_flag("--json", o->json, "Print one JSON object");
  return [o, model] {
    o->model_given = model->count() > 0;
    return run_export(*o);
  };
}

}  // namespace trident::cli
