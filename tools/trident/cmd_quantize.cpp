// `trident quantize MODEL.onnx --calibration IMAGES --output MODEL_INT8.onnx`: the model's
// convolutions calibrated on the user's images (as `trident infer --precision int8` does) and
// written out as a QDQ model, the form onnxruntime's and TensorRT's explicit quantization read:
// a QuantizeLinear → DequantizeLinear pair on each quantized convolution's input, its weights
// as int8 per output channel (ops/int8_quant.h's grid) behind a DequantizeLinear, batchnorm
// folded into them first. `trident infer` runs the file in int8 with those scales.
#include <chrono>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "calibration_input.h"
#include "commands.h"
#include "compile_flags.h"
#include "core/error.h"
#include "frontend/onnx/onnx_export.h"
#include "frontend/onnx/onnx_import.h"
#include "ops/int8_quant.h"
#include "runtime/int8_calibration.h"
#include "runtime/runner.h"

namespace trident::cli {

namespace {

struct Options {
  std::string model, output, calibration, calibrator = "entropy";
  bool json = false;
};

// Each conv2d whose input has a measured range reads it through a pair (one pair per input
// value, just before its first reader). Returns how many convolutions were quantized.
int insert_pairs(ir::Graph& g, const std::map<std::string, passes::Int8Options::Range>& ranges, int& kept) {
  std::map<int, int> pair_of;  // input value → the pair's output
  int quantized = 0;
  for (int id : std::vector<int>(g.order())) {
    if (g.node(id).op != "conv2d") continue;
    const int x = g.node(id).inputs[0];
    const auto r = ranges.find(g.value(x).name);
    if (r == ranges.end() || !(r->second.threshold > 0)) {
      ++kept;
      continue;
    }
    if (!pair_of.count(x)) {
      const bool is_unsigned = r->second.non_negative;
      const ir::Attrs a{{"scale", static_cast<double>(ops::int8_scale(r->second.threshold, is_unsigned))},
                        {"unsigned", int64_t{is_unsigned}},
                        {"zero_point", int64_t{0}}};
      const int q = g.add_node1("quantize_dequantize", {x}, a, g.value(x).name + ".int8");
      g.value(q).name = g.value(x).name + ".int8";
      const auto& order = g.order();
      g.move_to(g.value(q).producer, static_cast<size_t>(std::find(order.begin(), order.end(), id) - order.begin()));
      pair_of[x] = q;
    }
    g.node(id).inputs[0] = pair_of[x];
    ++quantized;
  }
  return quantized;
}

int run_quantize(const Options& o) {
  if (o.output.size() < 5 || o.output.compare(o.output.size() - 5, 5, ".onnx") != 0)
    throw Error("--output '" + o.output + "' must be an .onnx file");
  const runtime::Calibrator calibrator = runtime::parse_calibrator(o.calibrator);
  const auto t0 = std::chrono::steady_clock::now();
  frontend::OnnxImport imp = frontend::import_onnx(o.model);
  for (const std::string& notice : imp.notices) std::cerr << "trident: notice: " << notice << "\n";
  for (int id : imp.graph.order())
    if (imp.graph.node(id).op == "quantize_dequantize")
      throw Error("'" + o.model + "' is quantized already (it holds QuantizeLinear/DequantizeLinear pairs)");
  auto model_at = [&](int64_t batch) {
    frontend::OnnxOptions at;
    at.batch = batch;
    return frontend::import_onnx(o.model, at).graph;
  };
  nlohmann::json report;
  const HostTensor images = read_calibration_input(o.calibration, model_at, report);
  // Without the fusion passes the convolutions read the model's own values, so the ranges are
  // keyed by the names the model graph has.
  passes::CompileOptions compile = runtime::default_compile_options(passes::Mode::Infer);
  compile.backend = "cpu";
  compile.disabled_passes = {"fold_bn", "fuse_bn_relu", "fuse_conv_epilogue"};
  runtime::CalibrationResult measured;
  runtime::calibrate_network(model_at, [&](runtime::Runner& r) { r.load_weights(imp.weights, true); }, compile, {},
                             images, calibrator, measured);
  int kept = 0;
  const int quantized = insert_pairs(imp.graph, measured.ranges, kept);
  if (quantized == 0) throw Error("no convolution of '" + o.model + "' could be quantized (none has a calibrated input)");
  frontend::OnnxExportOptions out;
  out.fold_bn = true;
  const frontend::OnnxExportSummary s = frontend::export_onnx(imp.graph, imp.weights, out, o.output);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report.update({{"model", o.model}, {"output", o.output}, {"int8_convolutions", quantized}, {"f32_convolutions", kept},
                 {"calibrator", runtime::calibrator_name(calibrator)}, {"calibration_images", measured.images},
                 {"folded_batchnorms", s.folded_batchnorms}, {"nodes", s.nodes}, {"seconds", seconds}});
  if (o.json) {
    std::cout << report.dump() << "\n";
  } else {
    std::cout << "quantize: " << quantized << " convolutions in int8, " << kept << " in f32 ("
              << runtime::calibrator_name(calibrator) << " calibration on " << measured.images << " images), "
              << s.folded_batchnorms << " batchnorms folded; wrote " << o.output << " (" << s.nodes << " nodes) in "
              << seconds << " s\n";
  }
  return 0;
}

}  // namespace

RunSubcommand add_quantize_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "quantize", "Calibrate an ONNX model's convolutions on your images and write it as a QDQ model (int8)");
  sub->add_option("model", o->model, "MODEL.onnx")->required();
  sub->add_option("--output", o->output, "The QDQ model to write (.onnx)")->required();
  sub->add_option("--calibration", o->calibration,
                  "Images on which each convolution's input range is measured: an .npy file (NCHW, the model's input "
                  "size, a few hundred) or a folder of .jpg/.png images (as trident infer --precision int8 reads it)")
      ->required();
  sub->add_option("--calibrator", o->calibrator,
                  "How a range becomes a scale: entropy (least information lost), percentile (99.99 %) or max")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print one JSON object");
  return [o] { return run_quantize(*o); };
}

}  // namespace trident::cli
