// Builds, caches and executes the cuDNN graphs that kernels describe in cudnn_graphs.h. The
// only translation unit of the project that includes cudnn-frontend.
#include "backends/cuda/cudnn_graphs.h"

#include <cudnn_frontend.h>

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "backends/cuda/build_timing.h"
#include "backends/cuda/plan_cache.h"
#include "backends/cuda/verbose.h"
#include "core/error.h"
#include "core/verbose.h"

namespace trident::cuda {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// How many of the heuristics' candidates a tuned build times (the first ones, best-ranked).
constexpr int kTuneCandidates = 8;

struct CudnnGraph::Impl {
  fe::graph::Graph graph;
};

CudnnGraph::CudnnGraph() : impl_(std::make_unique<Impl>()) {}
CudnnGraph::~CudnnGraph() = default;

namespace {

fe::DataType_t frontend_type(DType t) {
  switch (t) {
    case DType::f32: return fe::DataType_t::FLOAT;
    case DType::f16: return fe::DataType_t::HALF;
    case DType::bf16: return fe::DataType_t::BFLOAT16;
    default:
      throw Error("cuDNN graphs take f32, f16 or bf16 tensors, not " + std::string(dtype_name(t)));
  }
}

const char* op_name(GraphOpKind k) {
  switch (k) {
    case GraphOpKind::conv_fprop: return "conv_fprop";
    case GraphOpKind::conv_dgrad: return "conv_dgrad";
    case GraphOpKind::conv_wgrad: return "conv_wgrad";
    case GraphOpKind::genstats: return "genstats";
    case GraphOpKind::add: return "add";
    case GraphOpKind::mul: return "mul";
    case GraphOpKind::relu: return "relu";
  }
  return "?";
}

std::vector<int64_t> pair(const std::array<int64_t, 2>& p) { return {p[0], p[1]}; }

// Throws unless the description is well formed (indices in range, uids unique and small).
void check_desc(const GraphDesc& d) {
  const int n = static_cast<int>(d.tensors.size());
  std::vector<bool> produced(n, false), seen_uid(kMaxGraphUid + 1, false);
  for (const GraphTensor& t : d.tensors) {
    if (t.uid < 0 || t.uid > kMaxGraphUid)
      throw Error("graph '" + d.purpose + "': tensor uid " + std::to_string(t.uid) + " is out of range");
    if (t.uid > 0 && seen_uid[t.uid])
      throw Error("graph '" + d.purpose + "': tensor uid " + std::to_string(t.uid) + " is used twice");
    if (t.uid > 0) seen_uid[t.uid] = true;
    if (t.dims.size() != t.strides.size() || t.dims.empty())
      throw Error("graph '" + d.purpose + "': a tensor needs as many strides as dims");
  }
  for (const GraphOp& op : d.ops)
    for (int i : op.inputs)
      if (i < 0 || i >= n) throw Error("graph '" + d.purpose + "': an op reads a tensor that does not exist");
  for (const GraphOp& op : d.ops)
    for (int o : op.outputs) {
      if (o < 0 || o >= n || produced[o])
        throw Error("graph '" + d.purpose + "': an op writes a missing or already written tensor");
      produced[o] = true;
    }
  for (int i = 0; i < n; ++i)
    if (!produced[i] && d.tensors[i].uid == 0)
      throw Error("graph '" + d.purpose + "': an input tensor has no uid to bind it to memory");
}

// Gives an op's output the description's dims, strides, dtype and uid (or keeps it virtual).
void describe_output(const TensorPtr& t, const GraphTensor& want, int index) {
  t->set_name("t" + std::to_string(index)).set_dim(want.dims).set_stride(want.strides);
  if (want.uid > 0) {
    t->set_output(true).set_uid(want.uid).set_data_type(frontend_type(want.dtype));
  } else {
    t->set_is_virtual(true).set_data_type(frontend_type(want.dtype));
  }
}

std::string message(fe::error_t e) { return e.get_message(); }

// The frontend's tensors for the description's inputs (tensors no op produces); null elsewhere.
std::vector<TensorPtr> input_tensors(const GraphDesc& d, fe::graph::Graph& g) {
  const int n = static_cast<int>(d.tensors.size());
  std::vector<bool> produced(n, false);
  for (const GraphOp& op : d.ops)
    for (int o : op.outputs) produced[o] = true;
  std::vector<TensorPtr> t(n);
  for (int i = 0; i < n; ++i) {
    if (produced[i]) continue;
    const GraphTensor& in = d.tensors[i];
    t[i] = g.tensor(fe::graph::Tensor_attributes()
                        .set_name("t" + std::to_string(i))
                        .set_dim(in.dims)
                        .set_stride(in.strides)
                        .set_data_type(frontend_type(in.dtype))
                        .set_uid(in.uid));
  }
  return t;
}

// Adds the description's op `k` to `g`, reading the tensors `t` holds; returns its outputs.
std::vector<TensorPtr> lower_op(const GraphDesc& d, size_t k, const std::vector<TensorPtr>& t, fe::graph::Graph& g) {
  const auto f32 = fe::DataType_t::FLOAT;
  const GraphOp& op = d.ops[k];
  const std::string name = std::string(op_name(op.kind)) + std::to_string(k);
  auto in = [&](size_t j) -> TensorPtr {
    if (j >= op.inputs.size() || !t[op.inputs[j]])
      throw Error("graph '" + d.purpose + "': op " + name + " reads a tensor before it is computed");
    return t[op.inputs[j]];
  };
  // The window and f32 accumulation, the same for the three convolution directions.
  auto window = [&](auto attributes) {
    attributes.set_padding(pair(d.window.padding))
        .set_stride(pair(d.window.stride))
        .set_dilation(pair(d.window.dilation))
        .set_compute_data_type(f32)
        .set_name(name);
    return attributes;
  };
  switch (op.kind) {
    case GraphOpKind::conv_fprop:
      return {g.conv_fprop(in(0), in(1), window(fe::graph::Conv_fprop_attributes()))};
    case GraphOpKind::conv_dgrad:
      return {g.conv_dgrad(in(0), in(1), window(fe::graph::Conv_dgrad_attributes()))};
    case GraphOpKind::conv_wgrad:
      // The frontend's wgrad takes (dy, x); descriptions list (x, dy) like the IR op.
      return {g.conv_wgrad(in(1), in(0), window(fe::graph::Conv_wgrad_attributes()))};
    case GraphOpKind::genstats: {
      auto [sum, sq_sum] = g.genstats(in(0), fe::graph::Genstats_attributes().set_compute_data_type(f32).set_name(name));
      return {sum, sq_sum};
    }
    case GraphOpKind::add:
    case GraphOpKind::mul:
      return {g.pointwise(in(0), in(1),
                          fe::graph::Pointwise_attributes()
                              .set_mode(op.kind == GraphOpKind::add ? fe::PointwiseMode_t::ADD
                                                                    : fe::PointwiseMode_t::MUL)
                              .set_compute_data_type(f32)
                              .set_name(name))};
    case GraphOpKind::relu: {
      auto attrs = fe::graph::Pointwise_attributes()
                       .set_mode(fe::PointwiseMode_t::RELU_FWD)
                       .set_compute_data_type(f32)
                       .set_name(name);
      if (op.relu_upper_clip > 0) attrs.set_relu_upper_clip(op.relu_upper_clip);
      return {g.pointwise(in(0), attrs)};
    }
  }
  return {};
}

// Lowers `d` into `g`. Returns "" or what the frontend refused.
std::string lower(const GraphDesc& d, fe::graph::Graph& g) {
  g.set_name(d.purpose)
      .set_io_data_type(frontend_type(d.io))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  std::vector<TensorPtr> t = input_tensors(d, g);
  for (size_t k = 0; k < d.ops.size(); ++k) {
    const GraphOp& op = d.ops[k];
    const std::vector<TensorPtr> out = lower_op(d, k, t, g);
    if (out.size() != op.outputs.size())
      throw Error("graph '" + d.purpose + "': op " + std::string(op_name(op.kind)) + std::to_string(k) + " has " +
                  std::to_string(out.size()) + " outputs, the description names " + std::to_string(op.outputs.size()));
    for (size_t j = 0; j < out.size(); ++j) {
      describe_output(out[j], d.tensors[op.outputs[j]], op.outputs[j]);
      t[op.outputs[j]] = out[j];
    }
  }
  return "";
}

// Bytes a tensor of the description spans in memory.
size_t span_bytes(const GraphTensor& t) {
  int64_t last = 0;
  for (size_t i = 0; i < t.dims.size(); ++i) last += (t.dims[i] - 1) * t.strides[i];
  return static_cast<size_t>(last + 1) * dtype_size(t.dtype);
}

// Times each built candidate on zero-filled scratch tensors (the run time of a convolution
// does not depend on the values) and returns the fastest one's index, or `candidates[0]` when
// scratch memory is short. `report` lists what was measured.
int64_t fastest_plan(fe::graph::Graph& g, const GraphDesc& d, cudnnHandle_t handle,
                     const std::vector<int64_t>& candidates, std::string& report, float& best_ms) {
  best_ms = 0.f;
  TimingScratch scratch;
  const std::vector<int64_t> uids = g.get_variant_pack_uids_sorted();
  std::vector<void*> pointers;
  for (int64_t uid : uids) {
    auto it = std::find_if(d.tensors.begin(), d.tensors.end(), [&](const GraphTensor& t) { return t.uid == uid; });
    void* p = it == d.tensors.end() ? nullptr : scratch.get(span_bytes(*it));
    if (!p) return candidates.front();
    pointers.push_back(p);
  }
  int64_t ws_bytes = 0;
  for (int64_t i : candidates) ws_bytes = std::max(ws_bytes, g.get_workspace_size_plan_at_index(i));
  void* ws = ws_bytes > 0 ? scratch.get(static_cast<size_t>(ws_bytes)) : nullptr;
  if (ws_bytes > 0 && !ws) return candidates.front();

  cudaStream_t stream = nullptr;
  cudnnGetStream(handle, &stream);
  int64_t best = candidates.front();
  std::ostringstream r;
  r << candidates.size() << " plans timed:";
  for (int64_t i : candidates) {
    const float ms = best_of_three_ms(stream, [&] {
      return g.execute_plan_at_index(handle, pointers.data(), static_cast<int>(pointers.size()), ws, i).is_good();
    });
    if (ms <= 0.f) continue;
    std::string name;
    if (g.get_plan_name_at_index(i, name).is_bad()) name = "plan " + std::to_string(i);
    r << " " << name << " " << std::fixed << std::setprecision(3) << ms << " ms";
    if (best_ms == 0.f || ms < best_ms) {
      best = i;
      best_ms = ms;
    }
  }
  report = best_ms > 0.f ? r.str() : "no candidate ran on scratch tensors; kept the heuristics' first choice";
  return best;
}

}  // namespace

// Milliseconds each step of a build took, for TRIDENT_VERBOSE's compile timeline.
struct BuildTimes {
  long long start = now_ns();
  double graph = 0, heuristics = 0, support = 0, plans = 0, timing = 0;
  // Adds the time since the last mark to `slot`.
  void mark(double& slot) {
    const long long t = now_ns();
    slot += static_cast<double>(t - start) / 1e6;
    start = t;
  }
  std::string text() const {
    std::ostringstream s;
    s << std::fixed << std::setprecision(1) << "operation graph " << graph << " ms, heuristics " << heuristics
      << " ms, support " << support << " ms, plan build " << plans << " ms, timing " << timing << " ms";
    return s.str();
  }
};

// What one attempt at building a graph chose, and how long its steps took.
struct BuildOutcome {
  int64_t plan_index = -1;  // the tuned or cached plan's index; -1: the heuristics' choice
  std::string report;       // what tuning measured, or where the plan came from
  float best_ms = 0.f;      // the chosen plan's time; 0 when untimed
  bool from_cache = false;  // the plan came from the plan cache (loaded, or known and built untimed)
  BuildTimes times;
};

namespace {

// Builds `known`'s plan alone where cuDNN still proposes a plan of its name at its index; true
// when it did (`out` then says so).
bool take_known_plan(fe::graph::Graph& g, const std::optional<PlanChoice>& known, BuildOutcome& out) {
  std::string known_name, name;
  float ms = 0.f;
  if (!known || known->index >= g.get_execution_plan_count() || !parse_plan_note(known->note, known_name, ms))
    return false;
  if (g.get_plan_name_at_index(known->index, name).is_bad() || name != known_name) return false;
  if (g.build_plan_at_index(known->index).is_bad() || g.prepare_variant_pack_template().is_bad()) return false;
  out.plan_index = known->index;
  out.best_ms = ms;
  out.report = "plan " + name + " from the plan cache, untimed (" + plan_note("timed", ms) + " when chosen)";
  out.from_cache = true;
  return true;
}

// One attempt at validate → operation graph → plans. Returns "" or the failing step's message.
// With tuning, out.plan_index is the fastest candidate's index (else -1: the heuristics' choice).
std::string try_build(const GraphDesc& d, cudnnHandle_t handle, bool deterministic_only, const PlanPolicy& policy,
                      fe::graph::Graph& g, BuildOutcome& out) {
  out = BuildOutcome{-1, "", 0.f, false, out.times};
  BuildTimes& times = out.times;
  if (std::string why = lower(d, g); !why.empty()) return why;
  if (auto e = g.validate(); e.is_bad()) return "validate: " + message(e);
  if (auto e = g.build_operation_graph(handle); e.is_bad()) return "build_operation_graph: " + message(e);
  times.mark(times.graph);
  if (auto e = g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}); e.is_bad())
    return "create_execution_plans: " + message(e);
  times.mark(times.heuristics);
  if (deterministic_only) g.deselect_numeric_notes({fe::NumericalNote_t::NONDETERMINISTIC});
  if (auto e = g.check_support(); e.is_bad()) return "check_support: " + message(e);
  times.mark(times.support);
  if (policy.tune_candidates <= 1) {
    if (auto e = g.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE); e.is_bad())
      return "build_plans: " + message(e);
    times.mark(times.plans);
    return "";
  }
  const bool known = take_known_plan(g, policy.known, out);
  times.mark(times.plans);
  if (known) return "";
  std::vector<int64_t> built;
  const int64_t count = g.get_execution_plan_count();
  for (int64_t i = 0; i < count && static_cast<int>(built.size()) < policy.tune_candidates; ++i)
    if (g.build_plan_at_index(i).is_good()) built.push_back(i);
  if (built.empty()) return "build_plans: none of the " + std::to_string(count) + " candidate engines could be built";
  // build_plans() prepares the pointer layout of execute(); building plan by plan does not.
  if (auto e = g.prepare_variant_pack_template(); e.is_bad()) return "variant pack: " + message(e);
  times.mark(times.plans);
  out.plan_index = fastest_plan(g, d, handle, built, out.report, out.best_ms);
  times.mark(times.timing);
  return "";
}

// The built plan as the plan cache keeps it: "<deterministic 0|1> TAB <plan_note>\n", then the
// frontend's serialization (the plan with its runtime-compiled kernels); "" when it has none.
std::string serialize_plan(fe::graph::Graph& g, int64_t plan_index, bool deterministic, const std::string& note) {
  // serialize() writes the frontend's current candidate: building the chosen plan again selects it
  // (a plan already built is not rebuilt).
  if (plan_index >= 0 && g.build_plan_at_index(plan_index).is_bad()) return "";
  std::vector<uint8_t> bytes;
  try {
    if (g.serialize(bytes).is_bad()) return "";
  } catch (const std::exception&) {  // the frontend's json
    return "";
  }
  return std::string(deterministic ? "1" : "0") + "\t" + note + "\n" + std::string(bytes.begin(), bytes.end());
}

// Loads a plan serialize_plan wrote into the empty graph `g`; "" or why the frontend refused it.
std::string load_plan(fe::graph::Graph& g, cudnnHandle_t handle, const std::string& payload, bool& deterministic,
                      std::string& name, float& ms) {
  const size_t line_end = payload.find('\n');
  if (line_end == std::string::npos || line_end < 2 || payload[1] != '\t' || (payload[0] != '0' && payload[0] != '1') ||
      !parse_plan_note(payload.substr(2, line_end - 2), name, ms))
    return "its first line is not \"<0|1> TAB <plan name> <time> ms\"";
  deterministic = payload[0] == '1';
  const std::vector<uint8_t> bytes(payload.begin() + static_cast<std::ptrdiff_t>(line_end) + 1, payload.end());
  try {
    if (auto e = g.deserialize(handle, bytes); e.is_bad()) return "deserialize: " + message(e);
    if (auto e = g.prepare_variant_pack_template(); e.is_bad()) return "variant pack: " + message(e);
  } catch (const std::exception& e) {  // the frontend's json
    return e.what();
  }
  return "";
}

}  // namespace

std::string GraphDesc::key() const {
  std::ostringstream k;
  k << "io=" << dtype_name(io) << " pad=" << window.padding[0] << "," << window.padding[1]
    << " stride=" << window.stride[0] << "," << window.stride[1] << " dil=" << window.dilation[0] << ","
    << window.dilation[1] << " |";
  for (const GraphTensor& t : tensors) {
    k << " t" << t.uid << ":" << dtype_name(t.dtype) << "[";
    for (int64_t v : t.dims) k << v << ",";
    k << "/";
    for (int64_t v : t.strides) k << v << ",";
    k << "]";
  }
  k << " |";
  for (const GraphOp& op : ops) {
    k << " " << op_name(op.kind) << "(";
    if (op.relu_upper_clip > 0) k << "max=" << op.relu_upper_clip << ";";
    for (int i : op.inputs) k << i << ",";
    k << "->";
    for (int o : op.outputs) k << o << ",";
    k << ")";
  }
  return k.str();
}

std::shared_ptr<CudnnGraph> CudnnGraph::build(const GraphDesc& desc, cudnnHandle_t handle, const PlanPolicy& policy) {
  check_desc(desc);
  // Two fp16 training runs through conv+genstats graphs differed in every tensor after one step on
  // the H200 (cuDNN 9.19 marks none of those engines non-deterministic), so a deterministic run
  // takes the channel-sums kernel for its statistics instead.
  if (policy.require_deterministic &&
      std::any_of(desc.ops.begin(), desc.ops.end(), [](const GraphOp& op) { return op.kind == GraphOpKind::genstats; }))
    throw Error("cuDNN cannot run " + desc.purpose +
                " deterministically: its genstats engines sum the statistics in an order that changes between runs");
  std::shared_ptr<CudnnGraph> built(new CudnnGraph());
  built->purpose_ = desc.purpose;
  BuildOutcome out;
  const bool loaded = policy.serialized && built->load(*policy.serialized, handle, policy.require_deterministic, out);
  if (!loaded) built->build_plans(desc, handle, policy, out);
  built->plan_index_ = out.plan_index;
  built->tuned_ms_ = out.best_ms;
  built->tuning_report_ = out.report;
  built->from_plan_cache_ = out.from_cache;
  built->describe_plan(desc, loaded);
  if (!loaded && policy.serialize && built->tuned_ms_ > 0.f)
    built->serialized_ = serialize_plan(built->impl_->graph, built->plan_index_, built->deterministic_,
                                        plan_note(built->plan_name_, built->tuned_ms_));
  out.times.mark(out.times.plans);
  built->build_times_ = out.times.text();
  return built;
}

bool CudnnGraph::load(const std::string& payload, cudnnHandle_t handle, bool require_deterministic, BuildOutcome& out) {
  bool deterministic = false;
  std::string name;
  float ms = 0.f;
  const std::string why = load_plan(impl_->graph, handle, payload, deterministic, name, ms);
  if (why.empty() && (deterministic || !require_deterministic)) {
    deterministic_ = deterministic;
    plan_name_ = name;
    out.best_ms = ms;
    out.report = "plan " + name + " loaded from the plan cache (" + plan_note("timed", ms) + " when chosen)";
    out.from_cache = true;
    return true;
  }
  impl_ = std::make_unique<Impl>();
  out.report = why.empty() ? "" : "the plan cache's plan was not loaded (" + why + "); ";
  return false;
}

void CudnnGraph::build_plans(const GraphDesc& desc, cudnnHandle_t handle, const PlanPolicy& policy, BuildOutcome& out) {
  const std::string not_loaded = out.report;
  deterministic_ = policy.prefer_deterministic || policy.require_deterministic;
  std::string why = try_build(desc, handle, deterministic_, policy, impl_->graph, out);
  if (!why.empty() && policy.require_deterministic) {
    throw Error("cuDNN has no deterministic engine for " + desc.purpose + " (" + why + ")");
  } else if (!why.empty() && policy.prefer_deterministic) {
    // No deterministic engine: take any (re-running may then differ in the last bits).
    impl_ = std::make_unique<Impl>();
    deterministic_ = false;
    const std::string second = try_build(desc, handle, false, policy, impl_->graph, out);
    if (!second.empty()) throw Error("cuDNN cannot run " + desc.purpose + ": " + second);
  } else if (!why.empty()) {
    throw Error("cuDNN cannot run " + desc.purpose + ": " + why);
  }
  out.report = not_loaded + out.report;
}

void CudnnGraph::describe_plan(const GraphDesc& desc, bool loaded) {
  fe::graph::Graph& g = impl_->graph;
  const bool tuned = plan_index_ >= 0;
  int64_t ws = 0;
  if (auto e = tuned ? g.get_workspace_size_plan_at_index(plan_index_, ws) : g.get_workspace_size(ws); e.is_bad())
    throw Error("cuDNN workspace query for " + desc.purpose + ": " + message(e));
  workspace_bytes_ = static_cast<size_t>(std::max<int64_t>(ws, 0));
  std::string plan;
  if (!loaded && (tuned ? g.get_plan_name_at_index(plan_index_, plan) : g.get_plan_name(plan)).is_good())
    plan_name_ = plan;
  for (int64_t uid : g.get_variant_pack_uids_sorted()) {
    if (uid <= 0 || uid > kMaxGraphUid)
      throw Error("cuDNN plan for " + desc.purpose + " reads tensor uid " + std::to_string(uid) +
                  ", which the description never bound");
    user_uids_.push_back(static_cast<int>(uid));
  }
}

void CudnnGraph::execute(cudnnHandle_t handle, const std::array<void*, kMaxGraphUid + 1>& pointers_by_uid,
                         void* workspace) const {
  std::array<void*, kMaxGraphUid + 1> sorted{};
  const int n = static_cast<int>(user_uids_.size());
  for (int i = 0; i < n; ++i) {
    sorted[i] = pointers_by_uid[user_uids_[i]];
    if (!sorted[i])
      throw Error("cuDNN graph " + purpose_ + " ran without a pointer for tensor uid " + std::to_string(user_uids_[i]));
  }
  if (workspace_bytes_ > 0 && !workspace)
    throw Error("cuDNN graph " + purpose_ + " needs a workspace and got none");
  auto e = plan_index_ >= 0 ? impl_->graph.execute_plan_at_index(handle, sorted.data(), n, workspace, plan_index_)
                            : impl_->graph.execute(handle, sorted.data(), n, workspace);
  if (e.is_bad()) throw Error("cuDNN failed to execute " + purpose_ + ": " + message(e));
}

GraphBuild cached_graph(CudaContext& ctx, const GraphDesc& desc) {
  PlanPolicy policy;
  const BackendOptions& options = ctx.kernel_options().backend;
  const bool autotune = options.times_candidates();
  policy.tune_candidates = autotune ? kTuneCandidates : 0;
  policy.require_deterministic = options.deterministic;
  const std::string key = ctx.signature_prefix() + (options.deterministic ? "deterministic-" : "") +
                          (autotune ? "tuned-graph/" : "graph/") + desc.key();
  // The plan cache's blob key says which policy chose the plan; its choice key stays the description's.
  // A serialized plan is the frontend's format: its version is part of the key.
  const std::string blob_key = "frontend " + std::to_string(CUDNN_FRONTEND_VERSION) + " " +
                               (options.deterministic ? "deterministic " : "") + desc.key();
  auto entry = ctx.cached<GraphBuild>(key, [&] {
    auto made = std::make_shared<GraphBuild>();
    try {
      if (autotune) {
        policy.known = cached_plan(ctx, desc.key());
        policy.serialized = cached_plan_blob(ctx, blob_key);
        policy.serialize = !policy.serialized && has_plan_cache(ctx);
      }
      made->graph = CudnnGraph::build(desc, ctx.cudnn(), policy);
      const CudnnGraph& built = *made->graph;
      if (autotune && built.plan_index() >= 0 && !built.from_plan_cache() && built.tuned_ms() > 0.f)
        store_plan(ctx, desc.key(), PlanChoice{static_cast<int>(built.plan_index()), plan_note(built.plan_name(), built.tuned_ms())});
      if (!built.serialized().empty()) store_plan_blob(ctx, blob_key, built.serialized());
      if (verbose())
        verbose_note("built " + desc.purpose + " with plan " + built.plan_name() +
                     (built.deterministic() ? "" : " (no deterministic engine)") + ", workspace " +
                     std::to_string(built.workspace_bytes()) + " bytes (" + built.build_times() + ")" +
                     (built.tuning_report().empty() ? "" : "; " + built.tuning_report()));
    } catch (const Error& e) {
      made->failure = e.what();
      if (verbose()) verbose_note(made->failure);
    } catch (const std::exception& e) {  // the frontend's json or allocation failures
      made->failure = "cuDNN cannot build " + desc.purpose + ": " + e.what();
      if (verbose()) verbose_note(made->failure);
    }
    return made;
  });
  return *entry;
}

}  // namespace trident::cuda
