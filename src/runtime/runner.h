// The inference Runner, trident's C++ API behind `trident infer`: compiles a graph for
// Mode::Infer, loads weights, takes inputs in the user's layout (NCHW for images, as PyTorch and
// ONNX), runs timed iterations and reports latency percentiles, throughput and top-k.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "ir/graph.h"
#include "runtime/executable.h"
#include "runtime/weights.h"

namespace trident::runtime {

// How host tensors given to or taken from the Runner are laid out. NCHW is the user's layout
// (PyTorch, ONNX, .npy files); NHWC is trident's own. Only 4-D tensors differ.
enum class Layout { NCHW, NHWC };

struct RunnerOptions {
  // What the passes read: backend, precision (f16/bf16 on the GPU: mixed precision), disabled
  // passes, the IR dump directory, the memory budget. The runner compiles for Mode::Infer.
  passes::CompileOptions compile = default_compile_options(passes::Mode::Infer);
  BackendOptions backend_options;  // timing, Winograd, CUDA graphs: how the backend builds kernels
};

// Latency of timed iterations (milliseconds) and throughput.
struct LatencyStats {
  int64_t batch = 0;
  int iterations = 0;
  double min_ms = 0, max_ms = 0, mean_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0;
  double total_s = 0;
  double qps = 0;          // batches (queries) per second: 1000 / mean_ms
  double throughput = 0;   // samples per second: batch * qps
};
// Statistics of per-iteration wall times in seconds; percentiles interpolate linearly between
// the sorted samples (NumPy's default). An empty input gives all zeros.
LatencyStats latency_stats(const std::vector<double>& seconds, int64_t batch);

struct TopEntry {
  int64_t index = 0;
  float score = 0;
};
// The k largest scores of each row of a 2-D [N, classes] tensor (f32, f64 or i32), best first;
// ties keep the lower index first. k is clamped to the number of classes.
std::vector<std::vector<TopEntry>> top_k(const HostTensor& scores, int k);

class Runner {
 public:
  // Compiles `model` for inference; the graph must have exactly one Input value.
  explicit Runner(const ir::Graph& model, const RunnerOptions& options = {});

  // Loads tensors by name (trident layouts). Optimizer state (passes::is_optimizer_state_name) found in training
  // checkpoints is skipped; any other unknown name is an Error. With `strict`, every parameter
  // and state tensor must be present. Returns the number loaded.
  size_t load_weights(const WeightMap& weights, bool strict);
  // Parameters from their init rules, running statistics at their defaults.
  void init_random_weights(uint64_t seed);

  const std::string& input_name() const { return input_name_; }
  int64_t batch() const;
  Shape input_shape(Layout layout = Layout::NCHW) const;
  // Copies `t` into the input; its shape must equal input_shape(layout). f64 and i32 are
  // converted to f32. Errors say which shape was expected, naming `what` (e.g. the file).
  void set_input(const HostTensor& t, Layout layout = Layout::NCHW, const std::string& what = "the input");
  // Fills the input with normal random values of a fixed seed.
  void set_random_input(uint64_t seed);

  void run();
  // `warmup` untimed runs, then `iterations` timed ones; their wall times are kept.
  LatencyStats benchmark(int warmup, int iterations);
  const std::vector<double>& latencies_s() const { return latencies_; }
  // Per-node seconds of one profiled run, with each node's name and op (in step order).
  struct NodeTime {
    std::string name, op;
    double seconds = 0;
  };
  std::vector<NodeTime> profile(int iterations);

  size_t num_outputs() const { return outputs_.size(); }
  std::string output_name(size_t i) const;
  // A copy of output i after the last run, 4-D outputs converted to `layout`.
  HostTensor output(size_t i = 0, Layout layout = Layout::NCHW) const;

  Executable& executable() { return *exe_; }
  const Executable& executable() const { return *exe_; }

 private:
  std::unique_ptr<Executable> exe_;
  int input_ = -1;
  std::string input_name_;
  std::vector<int> outputs_;
  std::vector<double> latencies_;
};

}  // namespace trident::runtime
