// `trident infer`: runs a model (ONNX file or zoo name) on an input (.npy, safetensors or random)
// and reports latency and throughput in the style of TensorRT's trtexec, top-k for classifiers,
// and optionally the raw first output as .npy (NCHW like PyTorch). --json for machines.

#include <algorithm>
#include <chrono>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "calibration_input.h"
#include "commands.h"
#include "compile_flags.h"
#include "core/error.h"
#include "core/printable.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/zoo.h"
#include "runtime/default_batch.h"
#include "runtime/int8_calibration.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/weight_file.h"
#include "runtime/npy.h"
#include "runtime/runner.h"

namespace trident::cli {

namespace {

struct Options {
  std::string model_file;  // positional
  std::string model;
  std::string weights, input, output;
  int64_t batch = 0;  // 0: from the input file, else 1
  int iterations = 20, warmup = 5, topk = 5, profile = 0;
  ThreadFlags threads;
  uint64_t seed = 1;
  bool json = false;
  DeviceFlags device;
  passes::CompileOptions compile;  // the backend is what --device resolves to
  std::string max_memory;
  std::string calibration, calibrator = "entropy";  // --precision int8
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

runtime::HostTensor read_input(const std::string& path, const std::string& input_name) {
  if (ends_with(path, ".npy")) return runtime::read_npy(path);
  if (!ends_with(path, ".safetensors"))
    throw Error("--input '" + path + "' must be a .npy or .safetensors file");
  runtime::WeightMap m = runtime::read_safetensors(path);
  for (const std::string& name : {input_name, std::string("input")})
    if (m.count(name)) return m.at(name);
  if (m.size() == 1) return m.begin()->second;
  std::string names;
  for (const auto& [n, t] : m) names += (names.empty() ? "" : ", ") + printable(n);
  throw Error("'" + path + "' holds " + std::to_string(m.size()) + " tensors (" + names + "); name the input '" +
              input_name + "' or keep only one");
}

// Seconds per op kind and the slowest nodes of `profile` profiled runs (averaged per run).
nlohmann::json profile_json(runtime::Runner& runner, int runs) {
  std::vector<runtime::Runner::NodeTime> nodes = runner.profile(runs);
  std::map<std::string, double> per_op;
  double total = 0;
  for (const auto& n : nodes) {
    per_op[n.op] += n.seconds;
    total += n.seconds;
  }
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  nlohmann::json j = {{"runs", runs}, {"total_ms", total * 1e3}, {"per_op_ms", nlohmann::json::object()},
                      {"slowest", nlohmann::json::array()}};
  for (const auto& [op, sec] : per_op) j["per_op_ms"][op] = sec * 1e3;
  for (size_t i = 0; i < std::min<size_t>(nodes.size(), 15); ++i)
    j["slowest"].push_back({{"node", nodes[i].name}, {"op", nodes[i].op}, {"ms", nodes[i].seconds * 1e3}});
  return j;
}

nlohmann::json stats_json(const runtime::LatencyStats& s) {
  return {{"min", s.min_ms}, {"max", s.max_ms}, {"mean", s.mean_ms}, {"median", s.p50_ms},
          {"p50", s.p50_ms}, {"p90", s.p90_ms}, {"p99", s.p99_ms}};
}

// How many convolutions of the compiled graph run in int8, and how many stay f32.
void count_int8_convolutions(const ir::Graph& g, nlohmann::json& int8) {
  int64_t quantized = 0, kept = 0;
  for (int id : g.order()) {
    const ir::Node& n = g.node(id);
    if (n.op == "conv2d_epilogue" && n.attrs.has("int8_input_scale")) ++quantized;
    else if (n.op == "conv2d" || n.op == "conv2d_epilogue") ++kept;
  }
  int8["int8_convolutions"] = quantized;
  int8["f32_convolutions"] = kept;
}

// --precision int8: the network compiled with its convolution inputs as outputs, run in f32 on
// --calibration's images, gives each input's range (runtime/int8_calibration.h); o.compile then
// quantizes with them. Returns what the JSON reports of it.
nlohmann::json calibrate_for_int8(Options& o, const std::function<ir::Graph(int64_t)>& model_at,
                                  const std::function<std::string(runtime::Runner&)>& load_weights) {
  if (o.calibration.empty())
    throw Error("--precision int8 needs --calibration FILE.npy or DIR: images like those the network will see (a "
                "few hundred), on which each layer's range is measured");
  const runtime::Calibrator calibrator = runtime::parse_calibrator(o.calibrator);
  const auto t0 = std::chrono::steady_clock::now();
  runtime::CalibrationResult result;
  nlohmann::json j;
  {
    const HostTensor images = read_calibration_input(o.calibration, model_at, j);
    o.compile = runtime::calibrate_network(model_at, [&](runtime::Runner& r) { load_weights(r); }, o.compile,
                                           o.device.backend_options, images, calibrator, result);
  }
  j.update({{"calibration", o.calibration}, {"calibrator", runtime::calibrator_name(calibrator)},
            {"calibration_images", result.images}, {"calibration_batches", result.batches},
            {"calibration_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}});
  return j;
}

int run_infer(Options o) {
  if (o.iterations < 1) throw Error("--iterations must be at least 1");
  o.compile.backend = resolve_device(o.device);
  const bool gpu = o.compile.backend == "cuda";
  if (!o.model_file.empty() && !o.model.empty())
    throw Error("give the model once: either MODEL.onnx or --model, not both");
  if (o.model_file.empty()) o.model_file = o.model.empty() ? frontend::default_model() : o.model;
  o.threads.apply();
  const bool onnx = ends_with(o.model_file, ".onnx");
  MemoryBudget budget = MemoryBudget::for_run(o.max_memory, "lower --batch");

  // The input file is read first: its batch is the default batch.
  runtime::HostTensor input;
  const bool have_input = !o.input.empty();
  if (have_input) {
    claim_file(budget, o.input, "--input '" + o.input + "'");
    input = read_input(o.input, "images");
    if (input.shape.empty()) throw Error("'" + o.input + "' holds a scalar; the model needs a batch of inputs");
    // Models take [N,C,H,W] or [N,F]: three axes are one image without its batch axis, whose
    // channels would otherwise be read as a batch.
    if (input.shape.size() == 3)
      throw Error("'" + o.input + "' has shape " + shape_str(input.shape) +
                  ", one image without a batch axis; the model takes a batch [N,C,H,W] (add a leading axis of 1, "
                  "x[None] in NumPy)");
    if (!runtime::kBatchLimit.allows(static_cast<double>(input.shape[0])))
      throw Error("--input '" + o.input + "' holds a batch of " + std::to_string(input.shape[0]) +
                  ", outside --batch's range (" + runtime::kBatchLimit.range() + "); split it into smaller files");
    if (o.batch == 0) o.batch = input.shape[0];
  }
  if (o.batch == 0) o.batch = onnx ? 0 : runtime::kDefaultInferBatch;  // an ONNX file: its own batch

  const auto t0 = std::chrono::steady_clock::now();
  ir::Graph model;
  runtime::WeightMap onnx_weights;
  std::string source = "zoo";
  if (onnx) {
    claim_file(budget, o.model_file, "the weights of '" + o.model_file + "'");
    frontend::OnnxOptions import;
    import.batch = o.batch;
    import.budget = &budget;
    frontend::OnnxImport imp = frontend::import_onnx(o.model_file, import);
    for (const std::string& notice : imp.notices) std::cerr << "trident: notice: " << notice << "\n";
    model = std::move(imp.graph);
    onnx_weights = std::move(imp.weights);
    source = "onnx";
  } else {
    model = frontend::build_model(o.model_file, {o.batch});
  }
  o.compile.precision = precision_dtype(o.device);
  o.compile.memory_budget = &budget;
  if (onnx)
    if (const std::string bad = runtime::non_finite_tensor(onnx_weights); !bad.empty())
      std::cerr << "trident: notice: '" << o.model_file << "' holds NaN or infinite values (in initializer '" << bad
                << "'); the outputs that depend on them will be NaN\n";
  // The content decides, not the name: a training checkpoint (run.ckpt) is a safetensors file
  // too, whose momentum buffers the runner leaves aside.
  runtime::WeightMap file_weights;
  if (!o.weights.empty()) {
    claim_file(budget, o.weights, "--weights '" + o.weights + "'");
    file_weights = runtime::read_weight_file(o.weights, model).weights;
    if (const std::string bad = runtime::non_finite_tensor(file_weights); !bad.empty())
      std::cerr << "trident: notice: --weights '" << o.weights << "' holds NaN or infinite values (in '" << bad
                << "'); the outputs that depend on them will be NaN\n";
  }
  // Loads the weights into a runner (the calibration's and the timed one); says where they came from.
  auto load_weights = [&](runtime::Runner& r) -> std::string {
    if (onnx) r.load_weights(onnx_weights, true);
    else if (o.weights.empty()) r.init_random_weights(o.seed);
    if (o.weights.empty()) return onnx ? "onnx" : "random";
    if (file_weights.empty() || r.load_weights(file_weights, !onnx) == 0)
      throw Error("--weights '" + o.weights + "' holds no tensor this network uses");
    return o.weights;
  };
  if (!o.calibration.empty() && o.device.precision != "int8")
    throw Error("--calibration is for --precision int8; this run is " + o.device.precision);
  // The same network at another batch (the calibration's); an ONNX file's weights are those read above.
  auto model_at = [&](int64_t batch) {
    if (!onnx) return frontend::build_model(o.model_file, {batch});
    frontend::OnnxOptions import;
    import.batch = batch;
    return frontend::import_onnx(o.model_file, import).graph;
  };
  nlohmann::json int8 = o.device.precision == "int8" ? calibrate_for_int8(o, model_at, load_weights) : nlohmann::json();
  runtime::Runner runner(model, {o.compile, o.device.backend_options});
  // The weights and the input are the run's data, not the compile: timed apart.
  const auto load_t0 = std::chrono::steady_clock::now();
  const std::string weights = load_weights(runner);
  if (!int8.is_null()) {
    count_int8_convolutions(runner.executable().graph(), int8);
  } else if (onnx) {  // a QDQ model quantizes with its own scales
    nlohmann::json model_scales = {{"scales", "model"}};
    count_int8_convolutions(runner.executable().graph(), model_scales);
    if (model_scales["int8_convolutions"].get<int64_t>() > 0) int8 = model_scales;
  }
  if (have_input) runner.set_input(input, runtime::Layout::NCHW, "'" + o.input + "'");
  else runner.set_random_input(o.seed);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - load_t0).count();
  runner.executable().prepare();
  const double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - load_s;
  const double device_start_s = runner.executable().context().startup_seconds();

  const runtime::LatencyStats s = runner.benchmark(o.warmup, o.iterations);
  const runtime::HostTensor out = runner.output(0, runtime::Layout::NCHW);
  if (!o.output.empty()) runtime::write_npy(o.output, out);
  const nlohmann::json prof = o.profile > 0 ? profile_json(runner, o.profile) : nlohmann::json();
  std::vector<std::vector<runtime::TopEntry>> top;
  if (out.shape.size() == 2 && out.shape[1] > 1 && o.topk > 0) top = runtime::top_k(out, o.topk);

  const std::string input_desc = have_input ? o.input : "random";
  if (o.json) {
    nlohmann::json outputs = nlohmann::json::array(), topj = nlohmann::json::array();
    for (size_t i = 0; i < runner.num_outputs(); ++i)
      outputs.push_back({{"name", runner.output_name(i)}, {"shape", runner.output(i).shape}});
    for (const auto& row : top) {
      nlohmann::json r = nlohmann::json::array();
      for (const auto& e : row) r.push_back({{"class", e.index}, {"logit", e.score}});
      topj.push_back(r);
    }
    nlohmann::json j = {{"model", o.model_file}, {"source", source}, {"weights", weights},
                        {"input", input_desc}, {"input_name", runner.input_name()},
                        {"input_shape", runner.input_shape()}, {"batch", runner.batch()},
                        {"device", gpu ? "cuda" : "cpu"}, {"backend", o.compile.backend}, {"precision", o.device.precision},
                        {"threads", runtime::HostThreads::max_threads()},
                        {"thread_policy", o.threads.policy}, {"warmup", o.warmup},
                        {"iterations", s.iterations}, {"compile_s", compile_s}, {"device_start_s", device_start_s},
                        {"load_s", load_s}, {"total_s", s.total_s},
                        {"latency_ms", stats_json(s)}, {"throughput_qps", s.qps},
                        {"throughput_images_per_s", s.throughput}, {"outputs", outputs}, {"topk", topj}};
    if (!o.output.empty()) j["output_file"] = o.output;
    if (!int8.is_null()) j["int8"] = int8;
    if (o.profile > 0) j["profile"] = prof;
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::cout << std::fixed << std::setprecision(3);
  std::cout << "=== Model ===\n"
            << "model: " << o.model_file << " (" << source << ", weights " << weights << ")\n"
            << "input: " << runner.input_name() << " f32" << shape_str(runner.input_shape())
            << (runner.input_shape().size() == 4 ? " NCHW" : "") << " from " << input_desc << "\n"
            << "device: " << (gpu ? "cuda" : "cpu") << ", backend " << o.compile.backend << ", "
            << runtime::HostThreads::max_threads() << " threads (" << o.threads.policy << "), " << o.device.precision << "\n"
            << "compile: " << compile_s << " s";
  if (device_start_s > 0) std::cout << " (starting the GPU " << device_start_s << " s of it)";
  std::cout << ", weights and input " << load_s << " s, warm-up " << o.warmup << " iterations, timed "
            << s.iterations << " iterations (" << s.total_s << " s)\n";
  if (!int8.is_null()) {
    std::cout << "int8: " << int8["int8_convolutions"] << " convolutions in int8, " << int8["f32_convolutions"] << " in f32; ";
    if (int8.contains("calibrator"))
      std::cout << int8["calibrator"].get<std::string>() << " calibration on " << int8["calibration_images"]
                << " images of '" << o.calibration << "' in " << int8["calibration_s"].get<double>() << " s"
                << (int8.contains("calibration_folder") && int8["calibration_folder"]["images_skipped"].get<int64_t>() > 0
                        ? " (" + std::to_string(int8["calibration_folder"]["images_skipped"].get<int64_t>()) +
                              " unreadable images skipped)"
                        : std::string())
                << "\n";
    else
      std::cout << "scales from the model's QuantizeLinear/DequantizeLinear pairs\n";
  }
  std::cout << "=== Performance summary ===\n"
            << "Throughput: " << s.qps << " qps (" << s.throughput << " images/s at batch " << s.batch << ")\n"
            << "Latency: min = " << s.min_ms << " ms, max = " << s.max_ms << " ms, mean = " << s.mean_ms
            << " ms, median = " << s.p50_ms << " ms, percentile(90%) = " << s.p90_ms
            << " ms, percentile(99%) = " << s.p99_ms << " ms\n";
  if (!top.empty()) {
    std::cout << "=== Top-" << top[0].size() << " (" << runner.output_name(0) << ") ===\n" << std::setprecision(4);
    const size_t shown = std::min<size_t>(top.size(), 4);
    for (size_t n = 0; n < shown; ++n) {
      std::cout << "sample " << n << ":\n";
      for (size_t r = 0; r < top[n].size(); ++r)
        std::cout << "  #" << r + 1 << " class " << top[n][r].index << "  logit " << top[n][r].score << "\n";
    }
    if (shown < top.size()) std::cout << "(" << top.size() - shown << " more samples; --json lists all)\n";
  } else {
    std::cout << "=== Output ===\n" << runner.output_name(0) << " f32" << shape_str(out.shape) << "\n";
  }
  if (o.profile > 0) {
    std::cout << "=== Profile (mean of " << o.profile << " runs, " << prof["total_ms"].get<double>() << " ms) ===\n";
    for (const auto& [op, ms] : prof["per_op_ms"].items())
      std::cout << "  " << std::left << std::setw(24) << op << std::right << std::setw(12) << ms.get<double>() << " ms\n";
    std::cout << "slowest nodes:\n";
    for (const auto& n : prof["slowest"])
      std::cout << "  " << std::left << std::setw(40) << n["node"].get<std::string>() << std::setw(20)
                << n["op"].get<std::string>() << std::right << std::setw(12) << n["ms"].get<double>() << " ms\n";
  }
  if (!o.output.empty()) std::cout << "wrote " << o.output << " (f32" << shape_str(out.shape) << ")\n";
  return 0;
}

}  // namespace

RunSubcommand add_infer_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("infer", "Run a model (ONNX file or zoo name) and measure latency and throughput");
  sub->add_option("onnx", o->model_file, "MODEL.onnx (or a zoo model name)");
  sub->add_option("--model", o->model, "Zoo model name or an .onnx file (default: " + frontend::default_model() + ")");
  sub->add_option("--weights", o->weights,
                  "Weights: a training checkpoint, or a PyTorch state dict saved with safetensors (told apart by content)");
  sub->add_option("--input", o->input, "Input as .npy or .safetensors, NCHW for images (default: random)");
  sub->add_option("--batch", o->batch, "Batch size (default: the input file's, else 1)")->check(within(runtime::kBatchLimit));
  sub->add_option("--iterations", o->iterations, "Timed iterations")->check(CLI::Range(1, 1000000))->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed warm-up iterations")->check(CLI::Range(0, 1000000))->capture_default_str();
  sub->add_option("--topk", o->topk, "Classes to list per sample for classifiers (0: none)")->check(CLI::Range(0, 1000000))->capture_default_str();
  sub->add_option("--output", o->output, "Write the first output to FILE.npy (NCHW for 4-D outputs)");
  add_seed_option(sub, o->seed, "Seed for random weights and inputs");
  sub->add_flag("--json", o->json, "Print one JSON object");
  add_device_options(sub, o->device, /*with_int8=*/true);
  sub->add_option("--calibration", o->calibration,
                  "--precision int8: images on which each convolution's input range is measured: an .npy file (NCHW, "
                  "the model's input size, a few hundred), or a folder of .jpg/.png images (up to 256 of them, spread "
                  "over the folder, resized and centre-cropped as evaluation does, normalised with ImageNet's mean and "
                  "std)");
  sub->add_option("--calibrator", o->calibrator,
                  "--precision int8: how a range becomes a scale: entropy (least information lost), percentile "
                  "(99.99 % of |x|) or max")
      ->check(CLI::IsMember({"entropy", "percentile", "max"}))
      ->capture_default_str();
  add_winograd_option(sub, o->device);
  add_plan_cache_option(sub, o->device);
  add_thread_options(sub, o->threads);
  add_memory_option(sub, o->max_memory);
  sub->add_option("--profile", o->profile, "After timing, profile N runs: time per op kind and the slowest nodes")
      ->check(CLI::Range(0, 100000));
  add_compile_flags(sub, o->compile);
  return [o] { return run_infer(*o); };
}

}  // namespace trident::cli
