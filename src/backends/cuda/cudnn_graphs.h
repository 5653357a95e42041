// cuDNN graphs without the cudnn-frontend headers: a kernel describes the graph it wants as
// plain data (tensors and ops), and this wrapper builds it once per context through
// cudnn-frontend, caches it under the description's full signature, and executes it with the
// device pointers of the run. The frontend is included only by cudnn_graphs.cpp, because its
// headers are slow to compile.
#pragma once
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_context.h"
#include "core/dtype.h"
#include "core/plan_cache_file.h"

namespace trident::cuda {

// One tensor of a graph, in cuDNN's logical order ([N,C,H,W] for activations, [K,C/g,R,S] for
// filters) with the strides of its real layout. uid > 0: bound to a pointer at execute time;
// uid == 0: a virtual intermediate that never reaches memory, held in its dtype (f32 unless a
// graph asks for the io dtype, as cuDNN's fused prologues want).
struct GraphTensor {
  int uid = 0;
  std::vector<int64_t> dims, strides;
  DType dtype = DType::f32;
};

enum class GraphOpKind {
  conv_fprop,  // inputs x, w → y
  conv_dgrad,  // inputs dy, w → dx
  conv_wgrad,  // inputs x, dy → dw
  genstats,    // input x → per-channel Σx and Σx² (f32, dims [1,C,1,1])
  add,         // a + b (b may broadcast, e.g. a [1,C,1,1] bias)
  mul,         // a · b
  relu,        // max(a, 0)
};

struct GraphOp {
  GraphOpKind kind = GraphOpKind::add;
  std::vector<int> inputs;   // indices into GraphDesc::tensors
  std::vector<int> outputs;  // indices into GraphDesc::tensors
  float relu_upper_clip = 0;  // relu only: > 0 clips there too (ReLU6)
};

// The window of the graph's convolution (every graph here has at most one).
struct ConvWindow {
  std::array<int64_t, 2> padding{0, 0}, stride{1, 1}, dilation{1, 1};
};

// Uids bound at execute time are small: pointers are passed in an array indexed by uid.
inline constexpr int kMaxGraphUid = 15;

struct GraphDesc {
  std::string purpose;  // "conv_fprop+bias+relu of node 'conv1'": for messages, not in key()
  DType io = DType::f32;
  std::vector<GraphTensor> tensors;
  std::vector<GraphOp> ops;
  ConvWindow window;

  // Index of a new tensor.
  int add_tensor(GraphTensor t) {
    tensors.push_back(std::move(t));
    return static_cast<int>(tensors.size()) - 1;
  }
  void add_op(GraphOpKind kind, std::vector<int> in, std::vector<int> out, float relu_upper_clip = 0) {
    ops.push_back({kind, std::move(in), std::move(out), relu_upper_clip});
  }
  // Everything the built plan depends on, as text (the cache key without the GPU prefix).
  std::string key() const;
};

// How build() chooses among the engines cuDNN's heuristics propose.
struct PlanPolicy {
  // Skip engines cuDNN marks non-deterministic unless no other engine runs the graph.
  bool prefer_deterministic = true;
  // > 1: build up to this many of the heuristics' candidates, time each on scratch tensors
  // (a warm-up, then the fastest of three runs) and keep the fastest, as cudnn.benchmark does.
  // ≤ 1: take the heuristics' first choice without running anything.
  int tune_candidates = 0;
  // Only deterministic engines: a graph that has none fails to build (BackendOptions::deterministic).
  bool require_deterministic = false;
  // With tuning: the plan an earlier compile timed (plan_cache.h), built alone and untimed while
  // cuDNN still proposes a plan of that name at that index.
  std::optional<PlanChoice> known;
  // A plan an earlier build serialized (CudnnGraph::serialized()), loaded instead of building
  // one; a plan the frontend refuses to load is built as if there were none.
  std::optional<std::string> serialized;
  // Whether to serialize the plan this build chooses.
  bool serialize = false;
};

struct BuildOutcome;

// A built graph with its chosen plan. Immutable after build: one graph may serve many
// kernels (identical nodes share it through the context's cache) and executes concurrently.
class CudnnGraph {
 public:
  ~CudnnGraph();
  // Builds the graph on `handle` (heuristics A, then the fallback list) and picks its plan as
  // `policy` says; tuning runs on the handle's stream and synchronises it. Throws an Error
  // saying what cuDNN rejected.
  static std::shared_ptr<CudnnGraph> build(const GraphDesc& desc, cudnnHandle_t handle, const PlanPolicy& policy = {});

  size_t workspace_bytes() const { return workspace_bytes_; }
  const std::string& plan_name() const { return plan_name_; }
  // Whether the plan was chosen among the engines cuDNN does not mark non-deterministic.
  bool deterministic() const { return deterministic_; }
  // What tuning measured ("3 plans timed: name 0.091 ms, ..."); empty without tuning.
  const std::string& tuning_report() const { return tuning_report_; }
  // The chosen plan's time on the scratch tensors (ms), measured by this build or, for a plan
  // from the plan cache, by the build that chose it; 0 when it was never timed.
  float tuned_ms() const { return tuned_ms_; }
  // The tuned plan's index among cuDNN's candidates (-1: the heuristics' choice, untuned), and
  // whether it was PlanPolicy::known rather than timed.
  int64_t plan_index() const { return plan_index_; }
  bool from_plan_cache() const { return from_plan_cache_; }
  // How long each step of the build took ("operation graph 1.2 ms, heuristics ..."), for
  // TRIDENT_VERBOSE.
  const std::string& build_times() const { return build_times_; }
  // The chosen plan with its compiled kernels, for the plan cache (PlanPolicy::serialize); empty
  // when not asked for or when the frontend cannot serialize it.
  const std::string& serialized() const { return serialized_; }

  // Runs on the stream bound to `handle`. pointers_by_uid[u] is the device pointer of the
  // tensor with uid u; `workspace` holds at least workspace_bytes(). No synchronisation.
  void execute(cudnnHandle_t handle, const std::array<void*, kMaxGraphUid + 1>& pointers_by_uid,
               void* workspace) const;

 private:
  struct Impl;
  CudnnGraph();
  // The steps of build(): load a serialized plan (true when it did), or build and choose one,
  // then read the chosen plan's workspace, name and tensors.
  bool load(const std::string& payload, cudnnHandle_t handle, bool require_deterministic, BuildOutcome& out);
  void build_plans(const GraphDesc& desc, cudnnHandle_t handle, const PlanPolicy& policy, BuildOutcome& out);
  void describe_plan(const GraphDesc& desc, bool loaded);
  std::unique_ptr<Impl> impl_;
  std::vector<int> user_uids_;  // the uids the plan reads, in the order execute passes them
  size_t workspace_bytes_ = 0;
  int64_t plan_index_ = -1;  // the tuned plan's index; -1: the heuristics' choice
  float tuned_ms_ = 0.f;
  std::string plan_name_, purpose_, tuning_report_, build_times_, serialized_;
  bool deterministic_ = true;
  bool from_plan_cache_ = false;
};

// The outcome of building a description: the graph, or why cuDNN refused it.
struct GraphBuild {
  std::shared_ptr<const CudnnGraph> graph;
  std::string failure;  // empty when graph is set
};

// The graph for `desc` from ctx's cache, built on ctx.cudnn() on a miss (tuned when the
// context's BackendOptions::autotune is on). Failures are cached too, so identical nodes do
// not pay for a refused build twice.
GraphBuild cached_graph(CudaContext& ctx, const GraphDesc& desc);

}  // namespace trident::cuda
