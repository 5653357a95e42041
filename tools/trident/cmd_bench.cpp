// `trident bench`: times whole training steps (forward + backward + optimizer) or inference
// runs of a zoo model, or of one CBR layer, on a device and precision. Prints images/s, ms per
// iteration (median, p90) and peak device memory; --json prints one object. An iteration ends
// when its results exist (the device is synchronised), as bench/vs_pytorch.py times PyTorch.
// Under mpirun it times the data-parallel step on every rank (rank 0 reports) beside the same
// step without collectives: the images/s per GPU and the scaling efficiency, with --sync-bn
// the measured step's batchnorms taking their statistics over all ranks.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "compile_flags.h"
#include "core/error.h"
#include "core/half.h"
#include "core/random.h"
#include "frontend/builder.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "runtime/runner.h"
#include "rank.h"

namespace trident::cli {

namespace {

struct Options {
  std::string model = "resnet50", mode = "train";
  int64_t batch = 32;
  std::vector<int64_t> layer{56, 56, 64, 64};  // cbr-layer: H, W, C, K
  int iterations = 50, warmup = 10, profile = 0;
  bool json = false, verbose = false, sync_bn = false;
  DeviceFlags device;
  passes::CompileOptions compile;  // the backend is what --device resolves to
  ThreadFlags threads;
  std::string max_memory;
  CLI::App* app = nullptr;  // to tell flags given on the command line from defaults
};

// One 3x3 Conv+BN+ReLU layer with a pooling+linear head. Its input is held in the run's
// precision, as the previous layer's output would be (no cast is timed). In training the input
// is a parameter, so the step computes the input gradient (dgrad) too, as a layer inside a
// network does.
ir::Graph cbr_layer(const Options& o, DType precision) {
  ir::Graph g;
  frontend::Builder b(g);
  const int64_t h = o.layer[0], w = o.layer[1], c = o.layer[2], k = o.layer[3];
  int x = o.mode == "train" ? g.add_parameter("x", {o.batch, h, w, c}, {ir::Init::KaimingNormal, 1}, precision)
                            : g.add_input("images", {o.batch, h, w, c}, precision);
  x = b.cbr(x, k, 3, 1, 1, "cbr");
  b.push("head");
  x = b.flatten(b.global_avgpool(x, "avgpool"), "flatten");
  x = b.linear(x, 10, true, "fc");
  b.pop();
  g.mark_output(x);
  return g;
}

// Random images and in-range labels, sent once: the benchmark times the step, not the data.
void fill_inputs(runtime::Executable& exe, int64_t classes) {
  Rng rng(7);
  for (const char* name : {"images", "labels", "lr"}) {
    if (!exe.has(name)) continue;
    const int id = exe.value_id(name);
    TensorView t = exe.host_view(id);
    if (t.dtype == DType::i32) {
      for (int64_t i = 0; i < t.numel(); ++i) t.as<int32_t>()[i] = static_cast<int32_t>(rng.next() % classes);
    } else if (std::string(name) == "lr") {
      for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = 1e-3f;
    } else {
      const DType d = t.dtype;
      void* data = t.data;
      draw_normals(rng, t.numel(), [d, data](int64_t i, double x) {
        if (d == DType::f16) static_cast<uint16_t*>(data)[i] = float_to_half(static_cast<float>(x));
        else if (d == DType::bf16) static_cast<uint16_t*>(data)[i] = float_to_bf16(static_cast<float>(x));
        else static_cast<float*>(data)[i] = static_cast<float>(x);
      });
    }
    exe.upload(id);
  }
}

// Seeded parameters and inputs on the device, everything prepared and synchronised; returns the
// seconds drawing and sending the weights and inputs took (the run's data, not its compile).
double start_inputs(runtime::Executable& exe) {
  const auto t0 = std::chrono::steady_clock::now();
  exe.init_parameters(1);
  fill_inputs(exe, exe.graph().value(exe.logits()).shape.back());
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  exe.prepare();
  exe.synchronize();
  return load_s;
}

struct Timing {
  runtime::LatencyStats stats;  // per step, each synchronised
  double images_per_s = 0;      // from the median step
  double throughput = 0;        // images/s with the steps back to back
  double total_s = 0;           // the synchronised steps, in all
};

// Warm-up, then the steps one by one (each synchronised: the median and p90), then as a
// training loop runs: the same number back to back, one wait at the end (a device backend
// queues them, so launch gaps hide behind running kernels).
Timing time_steps(runtime::Executable& exe, const Options& o) {
  for (int i = 0; i < o.warmup; ++i) exe.run();
  exe.synchronize();
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(o.iterations));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iterations; ++i) {
    const auto a = std::chrono::steady_clock::now();
    exe.run();
    exe.synchronize();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  Timing t;
  t.total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  t.stats = runtime::latency_stats(seconds, o.batch);
  t.images_per_s = static_cast<double>(o.batch) / (t.stats.p50_ms / 1e3);
  const auto run_start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iterations; ++i) exe.run();
  exe.synchronize();
  const double back_to_back_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  t.throughput = static_cast<double>(o.batch) * o.iterations / std::max(back_to_back_s, 1e-12);
  return t;
}

int run_bench(Options o) {
  if (o.mode != "train" && o.mode != "infer") throw Error("--mode must be train or infer, not '" + o.mode + "'");
  if (o.layer.size() != 4) throw Error("--layer takes four numbers: H W C K");
  const auto given = [&](const char* flag) { return o.app && o.app->count(flag) > 0; };
  o.compile.backend = resolve_device(o.device);
  // The defaults fit the device: ResNet-50 at batch 256 (the GPU's usual benchmark) would take
  // a 2-core CPU many minutes, so a CPU run without --model times the default network.
  if (!given("--model") && o.compile.backend != "cuda") o.model = frontend::default_model();
  if (!given("--batch")) o.batch = o.compile.backend == "cuda" ? 256 : 32;
  // A flag that would change nothing is refused, so a benchmark measures what its command says.
  if (given("--layer") && o.model != "cbr-layer")
    throw Error("--layer sets the shape of --model cbr-layer; it does nothing for '" + o.model + "'");
  if (given("--winograd") && o.mode == "train")
    throw Error("--winograd applies to inference (--mode infer); training never uses Winograd's convolutions");
  o.threads.apply();
  const DType precision = precision_dtype(o.device);
  const bool layer = o.model == "cbr-layer";
  ir::Graph model = layer ? cbr_layer(o, precision) : frontend::build_model(o.model, {o.batch});

  passes::CompileOptions& opt = o.compile;
  opt.mode = o.mode == "train" ? passes::Mode::Train : passes::Mode::Infer;
  opt.precision = precision;
  opt.optimizer = !layer;  // the layer benchmark times forward+backward; models a full step
  MemoryBudget budget = MemoryBudget::for_run(o.max_memory, "lower --batch");
  opt.memory_budget = &budget;
  distributed::World* world = o.device.backend_options.world.get();
  if (world && o.mode != "train")
    throw Error("under mpirun, bench times data-parallel training (--mode train); time inference in one process");
  if (o.sync_bn && !world)
    throw Error("--sync-bn times batchnorm over the ranks of an mpirun job; in one process it is plain batchnorm");
  o.device.backend_options.sync_batchnorm = o.sync_bn;
  // Under mpirun: the same step without collectives first, timed on this rank alone, is the
  // figure of one GPU that the scaling efficiency is taken against (the N = 1 run, measured on
  // these very GPUs in this very run).
  std::optional<Timing> alone;
  if (world) {
    BackendOptions single = o.device.backend_options;
    single.world = nullptr;
    passes::CompileOptions lone_opt = opt;
    lone_opt.memory_budget = nullptr;  // gone before the measured executable is compiled
    std::unique_ptr<runtime::Executable> lone = runtime::Executable::compile(model, lone_opt, single);
    start_inputs(*lone);
    alone = time_steps(*lone, o);
    world->barrier();
    opt.distributed = true;
    opt.world_size = world->size();
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<runtime::Executable> exe = runtime::Executable::compile(model, opt, o.device.backend_options);
  const double load_s = start_inputs(*exe);
  const double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - load_s;
  const Timing timed = time_steps(*exe, o);
  const double median = timed.stats.p50_ms, p90 = timed.stats.p90_ms, total_s = timed.total_s;
  const double ips = timed.images_per_s, throughput = timed.throughput;
  const runtime::LatencyStats& stats = timed.stats;
  // Optional: where the time goes, per op kind and per node (each node timed to its completion).
  nlohmann::json prof = nlohmann::json::object(), per_node = nlohmann::json::object();
  if (o.profile > 0) {
    std::vector<double> seconds;
    for (int i = 0; i < o.profile; ++i) exe->run_profiled(seconds);
    std::map<std::string, std::pair<double, int>> per_op;
    size_t step = 0;
    for (int nid : exe->graph().order()) {
      if (exe->memory_plan().hoisted[nid]) continue;
      auto& [ms, count] = per_op[exe->graph().node(nid).op];
      const double node_ms = step < seconds.size() ? seconds[step] * 1e3 / o.profile : 0;
      ms += node_ms;
      ++count;
      per_node[exe->graph().node(nid).name] = node_ms;
      ++step;
    }
    for (const auto& [op, v] : per_op) prof[op] = {{"ms", v.first}, {"nodes", v.second}};
  }
  const size_t peak = exe->context().peak_device_bytes();
  const std::string cache = exe->context().cache_report();
  if (!is_lead(world)) return 0;  // rank 0 reports for the job

  if (o.json) {
    nlohmann::json j = {{"model", o.model}, {"mode", o.mode}, {"batch", o.batch}, {"device", opt.backend == "cuda" ? "cuda" : "cpu"},
                        {"backend", opt.backend}, {"precision", o.device.precision}, {"iterations", o.iterations},
                        {"warmup", o.warmup}, {"images_per_s", ips}, {"throughput_images_per_s", throughput},
                        {"ms_median", median}, {"ms_p90", p90},
                        {"ms_min", stats.min_ms}, {"total_s", total_s},
                        {"compile_s", compile_s}, {"load_s", load_s}, {"peak_device_bytes", peak},
                        {"plan_bytes", exe->total_bytes()}, {"disabled_passes", opt.disabled_passes}};
    if (layer) j["layer"] = o.layer;
    if (world) {
      j["world_size"] = world->size();
      j["alone_throughput_images_per_s"] = alone->throughput;
      j["scaling_efficiency"] = throughput / alone->throughput;
      j["job_throughput_images_per_s"] = throughput * world->size();
      j["sync_bn"] = o.sync_bn;
    }
    if (o.verbose) j["cache"] = cache;
    if (o.profile > 0) {
      j["profile_ms_per_op"] = prof;
      j["profile_ms_per_node"] = per_node;
    }
    std::cout << j.dump() << std::endl;
    return 0;
  }
  std::cout << std::fixed << std::setprecision(3) << o.model << " " << o.mode << ", batch " << o.batch << ", "
            << opt.backend << " " << o.device.precision << ": " << std::setprecision(1) << ips << " images/s, "
            << std::setprecision(3) << median << " ms median, " << p90 << " ms p90 (" << o.iterations
            << " iterations after " << o.warmup << " warm-up; compile " << compile_s << " s, weights and inputs "
            << load_s << " s)\n"
            << std::setprecision(1) << throughput << " images/s with the steps back to back\n";
  if (world)
    std::cout << "data parallel over " << world->size() << " ranks: " << std::setprecision(1) << throughput
              << " images/s per " << (opt.backend == "cuda" ? "GPU" : "process") << ", " << throughput * world->size()
              << " in all; scaling efficiency " << std::setprecision(1) << 100 * throughput / alone->throughput
              << "% against the same step without collectives (" << alone->throughput << " images/s)"
              << (o.sync_bn ? ", batchnorm statistics over all ranks (--sync-bn)" : "") << "\n";
  if (peak) std::cout << "peak device memory " << std::setprecision(1) << peak / 1048576.0 << " MiB\n";
  std::cout << "planned buffers " << std::setprecision(1) << exe->total_bytes() / 1048576.0 << " MiB\n";
  if (o.verbose && !cache.empty()) std::cout << cache << "\n";
  if (o.profile > 0) {
    std::vector<std::pair<double, std::string>> rows;
    for (const auto& [op, v] : prof.items()) rows.push_back({v["ms"].get<double>(), op});
    std::sort(rows.rbegin(), rows.rend());
    std::cout << "profile (mean of " << o.profile << " runs, each node synchronised):\n";
    for (const auto& [ms, op] : rows)
      std::cout << "  " << std::left << std::setw(32) << op << std::right << std::setw(10) << std::setprecision(3) << ms
                << " ms  (" << prof[op]["nodes"].get<int>() << " nodes)\n";
  }
  return 0;
}

}  // namespace

RunSubcommand add_bench_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("bench", "Time training steps or inference of a model or one CBR layer");
  sub->add_option("--model", o->model,
                  "Zoo model name, or cbr-layer (one 3x3 CBR layer, see --layer); default: resnet50 on the GPU, "
                  "the default network (trident train's) on a CPU");
  sub->add_option("--mode", o->mode, "train (forward+backward+update) or infer")
      ->check(CLI::IsMember({"train", "infer"}))->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch size; default: 256 on the GPU, 32 on a CPU")->check(within(runtime::kBatchLimit));
  sub->add_option("--layer", o->layer, "cbr-layer shape: H W C K")->expected(4)->capture_default_str();
  sub->add_option("--iterations", o->iterations, "Timed iterations")->check(CLI::Range(1, 1000000))->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed warm-up iterations")->check(CLI::Range(0, 1000000))->capture_default_str();
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->add_option("--profile", o->profile, "Afterwards, time N runs node by node and report the time per op kind")
      ->check(CLI::Range(0, 10000));
  sub->add_flag("--verbose", o->verbose, "Also print the backend's plan-cache statistics");
  sub->add_flag("--sync-bn", o->sync_bn,
                "Under mpirun: the timed step's batchnorms take their statistics over all processes (as trident "
                "train --sync-bn)");
  add_device_options(sub, o->device);
  add_winograd_option(sub, o->device);
  add_plan_cache_option(sub, o->device);
  add_thread_options(sub, o->threads);
  add_memory_option(sub, o->max_memory);
  add_compile_flags(sub, o->compile);
  o->app = sub;
  return [o] {
    o->device.backend_options.world = distributed::join_world();  // null without mpirun
    return run_as_rank(o->device.backend_options.world.get(), [&] { return run_bench(*o); });
  };
}

}  // namespace trident::cli
