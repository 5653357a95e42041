// A compiled network: the graph after the pass pipeline, its static memory plan, and one
// kernel per node bound to fixed tensor views. run() executes the whole step (forward,
// backward and optimizer for training) with no allocation.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend_options.h"
#include "backends/input_lane.h"
#include "backends/kernel.h"
#include "ir/graph.h"
#include "passes/pass.h"
#include "plan/memory_plan.h"
#include "runtime/weights.h"

namespace trident::runtime {

// The graph after the pass pipeline plus its memory plan: everything short of buffers and
// kernels. `trident info` and `explain` stop here; Executable::compile continues from it.
struct CompiledGraph {
  ir::Graph graph;
  plan::MemoryPlan plan;
  int loss = -1, logits = -1;
  std::vector<std::pair<int, int>> param_grads;
  std::vector<passes::FusionRecord> fusions;
  std::vector<passes::Rejection> rejections;
};
CompiledGraph compile_graph(const ir::Graph& model, const passes::CompileOptions& options);
// `options` with the traits its backend declares (ops/backend_traits.h), which the passes read
// in place of the backend's name; compile_graph and every runtime entry point apply it.
passes::CompileOptions with_backend_traits(passes::CompileOptions options);

// Compile options for `mode` on the build's default backend, where the runner's and the
// trainer's configurations start.
inline passes::CompileOptions default_compile_options(passes::Mode mode) {
  passes::CompileOptions o;
  o.mode = mode;
  o.backend = default_backend();
  return o;
}

// The batch normalisations' running statistics of `g`: every value some node reads as its
// "running_mean" or "running_var" (as the op schemas name them), in value order.
std::vector<int> running_statistics(const ir::Graph& g);

class Executable {
 public:
  // Runs the standard pipeline for `options.mode` on a copy of `model`, plans memory and
  // lowers every node to `options.backend`, whose kernels are built as `backend` asks.
  // Errors name the node, pass or backend at fault.
  static std::unique_ptr<Executable> compile(const ir::Graph& model, const passes::CompileOptions& options,
                                             const BackendOptions& backend = {});

  // One step. Runs prepare() first when weights changed since the last one. On a device
  // backend with BackendOptions::cuda_graph the second run records the step and later runs
  // replay the recording (the same kernels on the same buffers, one launch).
  void run();
  // Recomputes hoisted results (folded weights) from the current parameters and state.
  // init_parameters and copy_weights_from call it; call it after writing weights directly.
  void prepare();
  // Runs the step's nodes up to and including the node named `node` (tracing a wrong result
  // to a layer: intermediate tensors are still intact there). An Error if there is no such step.
  void run_until(const std::string& node);
  // Like run(), adding each node's wall time (seconds) to `seconds_per_node` (by step index).
  void run_profiled(std::vector<double>& seconds_per_node);

  // The tensor behind a value id or a value name ("images", "labels", "lr", "conv1.weight"),
  // in the backend's memory: device memory on a GPU backend, which the host cannot read.
  TensorView view(int value) const;
  TensorView find(const std::string& name) const;
  bool has(const std::string& name) const;
  int value_id(const std::string& name) const;  // throws an Error naming an unknown tensor

  // Host access that works on every backend. host_view() is the host copy of a value (on host
  // backends the tensor itself); upload() sends it to the backend, download() fetches it back
  // (waiting for queued work). Both are no-ops on host backends.
  TensorView host_view(int value) const;
  void upload(int value);
  void download(int value) const;
  // Batches for `value` sent while a step runs (backends/input_lane.h): a lane on device
  // backends, null on host ones; take_input() queues the lane's last batch into the value
  // before the next run(). The lane must not outlive this executable.
  std::unique_ptr<InputLane> make_input_lane(int value);
  void take_input(InputLane& lane, int value);
  // Waits for every queued kernel (device backends run asynchronously).
  void synchronize();
  bool on_device() const { return ctx_->on_device(); }
  BackendContext& context() { return *ctx_; }

  // Parameters and state from their Init rules; a tensor's stream depends on (seed, name) only.
  void init_parameters(uint64_t seed);
  // Copies every parameter and state tensor present in both executables, matched by name.
  void copy_weights_from(const Executable& other);
  // Every parameter and state tensor (optimizer momentum included) by name.
  WeightMap export_weights() const;
  // Loads tensors by name. Shapes and dtypes must match exactly (an Error names the tensor);
  // with `strict`, every parameter and state tensor of the executable must be present.
  // Returns the number of tensors loaded. Names the executable does not have are errors.
  size_t import_weights(const WeightMap& weights, bool strict);

  const ir::Graph& graph() const { return graph_; }
  const plan::MemoryPlan& memory_plan() const { return plan_; }
  const passes::CompileOptions& options() const { return options_; }
  const BackendOptions& backend_options() const { return ctx_->kernel_options().backend; }
  int loss() const { return loss_; }      // -1 for inference
  int logits() const { return logits_; }
  const std::vector<std::pair<int, int>>& param_grads() const { return param_grads_; }
  // The batch normalisations' running statistics (runtime::running_statistics of the graph).
  std::vector<int> running_statistics() const;
  // (node name, implementation) for every kernel that reports how it runs (Kernel::implementation).
  std::vector<std::pair<std::string, std::string>> kernel_implementations() const;
  int64_t parameter_count() const;
  size_t total_bytes() const;  // all buffers together

 private:
  struct Bound {
    std::unique_ptr<Kernel> kernel;
    KernelArgs args;
  };
  // Storage from the backend context, returned to it on destruction.
  struct ContextFree {
    BackendContext* ctx;  // no default initializer: it would make the type incomplete here
    void operator()(std::byte* p) const { ctx->free(p); }
  };

  Executable(ir::Graph g, passes::CompileOptions options) : graph_(std::move(g)), options_(std::move(options)) {}

  ir::Graph graph_;
  passes::CompileOptions options_;
  plan::MemoryPlan plan_;
  std::shared_ptr<BackendContext> ctx_;  // declared before the buffers: freed after them
  std::unique_ptr<std::byte[], ContextFree> buffers_[plan::kNumBuffers];
  // Device backends: the host side of values (a cache, so reading weights stays const), in the
  // context's host-copy memory (page-locked on the GPU).
  struct HostFree {
    BackendContext* ctx;
    void operator()(std::byte* p) const { ctx->free_host_copy(p); }
  };
  mutable std::map<int, std::unique_ptr<std::byte[], HostFree>> host_copies_;
  // The step's kernels. oneDNN fixes a primitive's thread count when it is built, so where the
  // backend's kernels depend on it (the cpu backend) one set is kept per host thread count in
  // use (runtime/host_threads.h), built when that count is first wanted; otherwise one set.
  struct KernelSet {
    std::vector<Bound> steps;
    uint64_t prepared_version = 0;  // the weights_version_ its kernels were last prepared for
  };
  std::vector<Bound> build_steps(bool hoisted);
  // Before a step on a host backend: applies the thread count HostThreads asks for and, on a
  // backend whose kernels depend on it, switches to (building if new) that count's set.
  void use_host_threads();
  std::map<int, KernelSet> kernel_sets_;  // by thread count; key 0 when kernels do not depend on it
  std::vector<Bound>* steps_ = nullptr;   // the active set's steps
  int active_threads_ = 0;                // the active set's key
  std::vector<Bound> hoisted_steps_;
  bool prepared_ = false;
  uint64_t weights_version_ = 0;  // counts prepare() calls
  int runs_ = 0;              // direct runs since the last prepare(); recording starts at the second
  bool record_failed_ = false;  // the backend could not record this step: always run it directly
  int loss_ = -1, logits_ = -1;
  std::vector<std::pair<int, int>> param_grads_;
};

}  // namespace trident::runtime
