// Compile = passes → memory plan → lowering. Buffers are allocated once, zeroed, 64-byte
// aligned; every kernel gets its views at lowering time, so a step is a plain loop.
#include "runtime/executable.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "core/memory_budget.h"
#include "core/printable.h"
#include "core/random.h"
#include "core/verbose.h"
#include "ir/op_registry.h"
#include "runtime/host_threads.h"
#include "runtime/memory_estimate.h"

namespace trident::runtime {

passes::CompileOptions with_backend_traits(passes::CompileOptions options) {
  options.traits = KernelRegistry::traits(options.backend);
  return options;
}

CompiledGraph compile_graph(const ir::Graph& model, const passes::CompileOptions& given) {
  const passes::CompileOptions options = with_backend_traits(given);
  CompiledGraph c{model, {}, -1, -1, {}, {}, {}};
  passes::PassContext ctx{options};
  if (!c.graph.outputs().empty()) ctx.logits = c.graph.outputs()[0];
  passes::standard_pipeline(options.mode, options).run(c.graph, ctx);
  c.loss = ctx.loss;
  c.logits = ctx.logits;
  c.param_grads = ctx.param_grads;
  c.fusions = ctx.fusions;
  c.rejections = ctx.rejections;
  c.plan = plan::plan_memory(c.graph, ctx.param_grads, options.mode == passes::Mode::Infer);
  return c;
}

std::unique_ptr<Executable> Executable::compile(const ir::Graph& model, const passes::CompileOptions& options,
                                                const BackendOptions& backend) {
  const long long start = now_ns();
  CompiledGraph c = compile_graph(model, options);
  if (verbose()) verbose_note("compile", "passes and memory plan in " + ms_text(elapsed_ms(start)));
  std::unique_ptr<Executable> exe(new Executable(std::move(c.graph), options));
  exe->loss_ = c.loss;
  exe->logits_ = c.logits;
  exe->param_grads_ = std::move(c.param_grads);
  exe->plan_ = std::move(c.plan);

  exe->ctx_ = KernelRegistry::make_context(options.backend, backend);
  // Kernels the backend runs beside the next one (a second stream) must not share its memory.
  if (const std::vector<int> concurrent = exe->ctx_->concurrent_steps(exe->graph_, backend); !concurrent.empty())
    exe->plan_ = plan::plan_memory(exe->graph_, exe->param_grads_, options.mode == passes::Mode::Infer, concurrent);
  MemoryBudget* budget = options.memory_budget;
  const std::string graph_name = "the " + std::string(passes::mode_name(options.mode)) + " graph's ";
  if (budget) {
    const MemoryEstimate est = estimate_memory(exe->plan_, exe->ctx_->on_device());
    const std::string what = graph_name + "buffers (" + est.breakdown + ")";
    if (const std::optional<uint64_t> free = exe->ctx_->free_device_bytes())
      budget->check_device(est.backend_bytes, *free, what);
    budget->claim(est.host_bytes, exe->ctx_->on_device() ? graph_name + "host copies" : what);
  }
  exe->ctx_->set_kernel_options(
      {backend, options.mode == passes::Mode::Infer, budget ? budget->headroom() : UINT64_MAX});
  // TRIDENT_POISON_ARENA=1 fills intermediate tensors with NaN before the first step, so a
  // kernel that reads an element nothing wrote shows up as NaN instead of as stale zeros.
  const char* poison = std::getenv("TRIDENT_POISON_ARENA");
  for (int b = 1; b < plan::kNumBuffers; ++b) {
    size_t bytes = std::max<size_t>(exe->plan_.buffer_bytes[b], plan::kAlignment);
    exe->buffers_[b] = std::unique_ptr<std::byte[], ContextFree>(
        static_cast<std::byte*>(exe->ctx_->allocate(bytes)), ContextFree{exe->ctx_.get()});
    if (poison && std::string(poison) == "1" && b == static_cast<int>(plan::Buffer::Arena)) {
      const std::vector<std::byte> nan(bytes, std::byte{0xff});
      exe->ctx_->copy_to_device(exe->buffers_[b].get(), nan.data(), bytes);
    }
  }
  if (verbose()) verbose_note("compile", "context and buffers ready at " + ms_text(elapsed_ms(start)));
  exe->hoisted_steps_ = exe->build_steps(true);
  exe->active_threads_ = exe->ctx_->kernels_depend_on_threads() ? omp_get_max_threads() : 0;
  exe->steps_ = &(exe->kernel_sets_[exe->active_threads_].steps = exe->build_steps(false));
  if (verbose())
    verbose_note("compile", std::to_string(exe->graph_.order().size()) + " kernels built; compile took " +
                                ms_text(elapsed_ms(start)));
  // Workspaces are reserved while kernels are built and allocated when they first run.
  if (budget) {
    const size_t workspaces = exe->ctx_->workspace_bytes();
    if (const std::optional<uint64_t> free = exe->ctx_->free_device_bytes())
      budget->check_device(workspaces, *free, graph_name + "kernel workspaces");
    else
      budget->claim(workspaces, graph_name + "kernel workspaces");
  }
  return exe;
}

std::vector<Executable::Bound> Executable::build_steps(bool hoisted) {
  std::vector<Bound> steps;
  for (int nid : graph_.order()) {
    if (plan_.hoisted[nid] != hoisted) continue;
    const ir::Node& n = graph_.node(nid);
    KernelArgs args{n, {}, {}};
    for (int in : n.inputs) args.in.push_back(view(in));
    for (int out : n.outputs) args.out.push_back(view(out));
    const long long start = now_ns();
    steps.push_back({KernelRegistry::make(options_.backend, n, graph_, *ctx_), std::move(args)});
    // Building a kernel that times its choices shows in a compile's TRIDENT_VERBOSE timeline.
    if (const double ms = elapsed_ms(start); verbose() && ms >= 5.0)
      verbose_note("compile", "kernel " + n.op + " for '" + n.name + "' built in " + ms_text(ms));
    // Inference: weights change only between prepare() calls (copy/import/init mark that).
    steps.back().kernel->set_constant_weights(ctx_->kernel_options().constant_weights);
  }
  return steps;
}

void Executable::use_host_threads() {
  if (ctx_->on_device()) return;
  const int threads = HostThreads::for_next_step();
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
  if (!ctx_->kernels_depend_on_threads() || threads == active_threads_) return;
  KernelSet& set = kernel_sets_[threads];
  if (set.steps.empty()) set.steps = build_steps(false);  // built under omp's new thread count
  if (set.prepared_version != weights_version_) {
    for (Bound& s : set.steps) s.kernel->prepare(s.args);
    set.prepared_version = weights_version_;
  }
  steps_ = &set.steps;
  active_threads_ = threads;
}

namespace {
// A kernel's failure names its node and the graph it belongs to.
[[noreturn]] void rethrow_with_node(const Error& e, const ir::Node& n, passes::Mode mode) {
  const std::string what = e.what();
  if (what.find("node '" + n.name + "'") != std::string::npos) throw e;
  throw Error("node '" + n.name + "' (" + n.op + ") of the " + std::string(passes::mode_name(mode)) +
              " graph: " + what);
}
}  // namespace

void Executable::run() {
  if (!prepared_) prepare();
  use_host_threads();
  if (ctx_->has_recording()) {
    ctx_->replay();
    return;
  }
  // The first run allocates what kernels create lazily (workspaces); the second is recorded.
  if (backend_options().cuda_graph && !record_failed_ && runs_ >= 1 && ctx_->begin_recording()) {
    bool recorded = true;
    try {
      for (Bound& s : *steps_) s.kernel->run(s.args);
    } catch (const Error&) {
      recorded = false;  // an enqueue that recording refused; the direct run below reports real errors
    }
    recorded = ctx_->end_recording() && recorded;
    if (recorded) {
      ctx_->replay();
      return;
    }
    ctx_->discard_recording();
    record_failed_ = true;
  }
  for (Bound& s : *steps_) {
    try {
      s.kernel->run(s.args);
    } catch (const Error& e) {
      rethrow_with_node(e, s.args.node, options_.mode);
    }
  }
  ++runs_;
}

void Executable::run_until(const std::string& node) {
  if (!prepared_) prepare();
  use_host_threads();
  for (Bound& s : *steps_) {
    try {
      s.kernel->run(s.args);
    } catch (const Error& e) {
      rethrow_with_node(e, s.args.node, options_.mode);
    }
    if (s.args.node.name == node) return;
  }
  throw Error("the compiled step has no node named '" + node + "'");
}

void Executable::prepare() {
  const long long start = now_ns();
  ctx_->discard_recording();  // kernels may change what they enqueue with new weights
  runs_ = 0;
  for (Bound& s : hoisted_steps_) s.kernel->run(s.args);
  for (Bound& s : *steps_) s.kernel->prepare(s.args);
  kernel_sets_[active_threads_].prepared_version = ++weights_version_;
  prepared_ = true;
  if (verbose()) verbose_note("compile", "kernels prepared for these weights in " + ms_text(elapsed_ms(start)));
}

void Executable::run_profiled(std::vector<double>& seconds_per_node) {
  using clock = std::chrono::steady_clock;
  if (!prepared_) prepare();
  use_host_threads();
  std::vector<Bound>& steps = *steps_;
  seconds_per_node.resize(steps.size(), 0.0);
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto t0 = clock::now();
    steps[i].kernel->run(steps[i].args);
    ctx_->synchronize();
    seconds_per_node[i] += std::chrono::duration<double>(clock::now() - t0).count();
  }
}

TensorView Executable::view(int value) const {
  const ir::Value& v = graph_.value(value);
  const plan::Placement& p = plan_.placement.at(value);
  if (p.buffer == plan::Buffer::None)
    throw Error("value '" + v.name + "' has no storage: no live node produces or reads it");
  return {buffers_[static_cast<int>(p.buffer)].get() + p.offset, v.shape, v.dtype};
}

bool Executable::has(const std::string& name) const {
  int id = graph_.find_value(name);
  return id >= 0 && plan_.placement[id].buffer != plan::Buffer::None;
}

int Executable::value_id(const std::string& name) const {
  int id = graph_.find_value(name);
  if (id < 0) throw Error("the compiled network has no tensor named '" + name + "'");
  return id;
}

TensorView Executable::find(const std::string& name) const { return view(value_id(name)); }

TensorView Executable::host_view(int value) const {
  TensorView t = view(value);
  if (!ctx_->on_device()) return t;
  auto it = host_copies_.find(value);
  if (it == host_copies_.end()) {
    auto* p = static_cast<std::byte*>(ctx_->allocate_host_copy(t.bytes()));
    it = host_copies_.emplace(value, std::unique_ptr<std::byte[], HostFree>(p, HostFree{ctx_.get()})).first;
  }
  t.data = it->second.get();
  return t;
}

void Executable::upload(int value) {
  if (!ctx_->on_device()) return;
  TensorView h = host_view(value);
  ctx_->copy_to_device(view(value).data, h.data, h.bytes());
}

void Executable::download(int value) const {
  if (!ctx_->on_device()) return;
  TensorView h = host_view(value);
  ctx_->copy_to_host(h.data, view(value).data, h.bytes());
}

std::unique_ptr<InputLane> Executable::make_input_lane(int value) { return ctx_->make_input_lane(view(value).bytes()); }

void Executable::take_input(InputLane& lane, int value) {
  const TensorView t = view(value);
  if (lane.bytes() != t.bytes())
    throw Error("an input lane of " + std::to_string(lane.bytes()) + " bytes cannot fill '" + graph_.value(value).name +
                "' of " + std::to_string(t.bytes()) + " bytes");
  lane.deliver(t.data);
}

void Executable::synchronize() { ctx_->synchronize(); }

namespace {
template <class T>
void fill_init(T* data, int64_t n, const ir::Init& init, Rng& rng) {
  const double fan = static_cast<double>(std::max<int64_t>(init.fan_in, 1));
  for (int64_t i = 0; i < n; ++i) {
    switch (init.kind) {
      case ir::Init::Zeros: data[i] = T(0); break;
      case ir::Init::Ones: data[i] = T(1); break;
      case ir::Init::Constant: data[i] = T(init.value); break;
      case ir::Init::KaimingNormal: data[i] = T(rng.normal() * std::sqrt(2.0 / fan)); break;
      case ir::Init::KaimingUniform: {
        const double bound = 1.0 / std::sqrt(fan);
        data[i] = T(rng.uniform(-bound, bound));
        break;
      }
      case ir::Init::RandomBits: throw Error("random bits initialise i32 tensors only");
    }
  }
}
}  // namespace

namespace {
// One tensor's initial values from its own stream (`rng`), by its declared init.
void init_tensor(const ir::Value& val, TensorView t, Rng rng) {
  if (t.dtype == DType::i32) {
    for (int64_t i = 0; i < t.numel(); ++i)
      t.as<int32_t>()[i] = val.init.kind == ir::Init::Zeros ? 0 : static_cast<int32_t>(static_cast<uint32_t>(rng.next() >> 32));
  } else if (t.dtype == DType::f32) {
    fill_init(t.as<float>(), t.numel(), val.init, rng);
  } else if (t.dtype == DType::f64) {
    fill_init(t.as<double>(), t.numel(), val.init, rng);
  } else {  // f16, bf16
    std::vector<float> f(static_cast<size_t>(t.numel()));
    fill_init(f.data(), t.numel(), val.init, rng);
    for (size_t i = 0; i < f.size(); ++i)
      t.as<uint16_t>()[i] = t.dtype == DType::f16 ? float_to_half(f[i]) : float_to_bf16(f[i]);
  }
}
}  // namespace

void Executable::init_parameters(uint64_t seed) {
  prepared_ = false;
  // Each tensor has its own stream: filled on every host thread (ResNet-50 has 25 M values),
  // after the views (which allocate host copies) are taken in order, then uploaded in order.
  std::vector<std::pair<int, TensorView>> tensors;
  for (int v = 0; v < graph_.num_values(); ++v) {
    const ir::Value& val = graph_.value(v);
    if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
    if (plan_.placement[v].buffer == plan::Buffer::None) continue;
    const DType d = val.dtype;
    if (d == DType::i32 && val.init.kind != ir::Init::RandomBits && val.init.kind != ir::Init::Zeros)
      throw Error("cannot initialise the i32 tensor '" + val.name + "' other than with zeros or random bits");
    if (d != DType::i32 && d != DType::f32 && d != DType::f64 && d != DType::f16 && d != DType::bf16)
      throw Error("cannot initialise '" + val.name + "' of dtype " + std::string(dtype_name(d)));
    if (d != DType::i32 && val.init.kind == ir::Init::RandomBits)
      throw Error("random bits initialise i32 tensors only ('" + val.name + "' is " + std::string(dtype_name(d)) + ")");
    tensors.emplace_back(v, host_view(v));
  }
  const int count = static_cast<int>(tensors.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (int i = 0; i < count; ++i) {
    const ir::Value& val = graph_.value(tensors[i].first);
    init_tensor(val, tensors[i].second, Rng(seed ^ hash_name(val.name)));
  }
  for (const auto& [v, t] : tensors) upload(v);
}

void Executable::copy_weights_from(const Executable& other) {
  prepared_ = false;
  for (int v = 0; v < graph_.num_values(); ++v) {
    const ir::Value& val = graph_.value(v);
    if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
    if (plan_.placement[v].buffer == plan::Buffer::None || !other.has(val.name)) continue;
    const int src_id = other.value_id(val.name);
    other.download(src_id);
    TensorView dst = host_view(v), src = other.host_view(src_id);
    if (src.shape != dst.shape || src.dtype != dst.dtype)
      throw Error("cannot copy '" + val.name + "': " + shape_str(src.shape) + " vs " + shape_str(dst.shape));
    std::memcpy(dst.data, src.data, dst.bytes());
    upload(v);
  }
}

WeightMap Executable::export_weights() const {
  WeightMap out;
  for (int v = 0; v < graph_.num_values(); ++v) {
    const ir::Value& val = graph_.value(v);
    if (val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) continue;
    if (plan_.placement[v].buffer == plan::Buffer::None) continue;
    download(v);
    TensorView t = host_view(v);
    HostTensor h{t.shape, t.dtype, std::vector<std::byte>(t.bytes())};
    std::memcpy(h.data.data(), t.data, t.bytes());
    out.emplace(val.name, std::move(h));
  }
  return out;
}

namespace {
// For every value: whether some node reads it as an input its schema names `name`
// ("running_var": batchnorm2d's, the fused cbr/cbar's and fold_batchnorm's).
std::vector<char> read_as(const ir::Graph& g, const std::string& name) {
  std::vector<char> is(static_cast<size_t>(g.num_values()), 0);
  for (int nid : g.order()) {
    const ir::Node& n = g.node(nid);
    const std::vector<std::string>& names = ir::OpRegistry::get(n.op).inputs;
    for (size_t i = 0; i < n.inputs.size() && i < names.size(); ++i)
      if (names[i] == name) is[static_cast<size_t>(n.inputs[i])] = 1;
  }
  return is;
}
std::vector<char> running_variances(const ir::Graph& g) { return read_as(g, "running_var"); }

// A running variance must be finite and not negative: normalising by the square root of a
// negative one makes every output NaN.
template <class T>
void check_variance(const std::string& name, const T* v, int64_t n) {
  for (int64_t c = 0; c < n; ++c)
    if (!std::isfinite(v[c]) || v[c] < 0)
      throw Error("weight " + quoted_name(name) + " is a batch normalisation's running variance but holds " +
                  std::to_string(v[c]) + " at channel " + std::to_string(c) +
                  "; a variance must be finite and not negative (the outputs would be NaN)");
}
}  // namespace

std::vector<int> running_statistics(const ir::Graph& g) {
  const std::vector<char> mean = read_as(g, "running_mean"), var = read_as(g, "running_var");
  std::vector<int> out;
  for (int v = 0; v < g.num_values(); ++v)
    if (mean[static_cast<size_t>(v)] || var[static_cast<size_t>(v)]) out.push_back(v);
  return out;
}

std::vector<int> Executable::running_statistics() const { return runtime::running_statistics(graph_); }

size_t Executable::import_weights(const WeightMap& weights, bool strict) {
  const std::vector<char> is_var = running_variances(graph_);
  size_t loaded = 0;
  for (const auto& [name, h] : weights) {
    const int id = graph_.find_value(name);
    if (id < 0 || (graph_.value(id).role != ir::ValueRole::Parameter &&
                   graph_.value(id).role != ir::ValueRole::State))
      throw Error("the weights hold " + quoted_name(name) + ", which this network has no parameter or state for");
    if (plan_.placement[id].buffer == plan::Buffer::None) continue;
    TensorView t = view(id);
    if (h.shape != t.shape || h.dtype != t.dtype)
      throw Error("weight " + quoted_name(name) + " is " + std::string(dtype_name(h.dtype)) + shape_str(h.shape) +
                  " but the network expects " + std::string(dtype_name(t.dtype)) + shape_str(t.shape));
    if (h.data.size() != t.bytes())
      throw Error("weight " + quoted_name(name) + " holds " + std::to_string(h.data.size()) + " bytes, expected " +
                  std::to_string(t.bytes()));
    if (is_var[static_cast<size_t>(id)] && h.dtype == DType::f32)
      check_variance(name, reinterpret_cast<const float*>(h.data.data()), numel(h.shape));
    if (is_var[static_cast<size_t>(id)] && h.dtype == DType::f64)
      check_variance(name, reinterpret_cast<const double*>(h.data.data()), numel(h.shape));
    ++loaded;
  }
  if (strict)
    for (int v = 0; v < graph_.num_values(); ++v) {
      const ir::Value& val = graph_.value(v);
      if ((val.role == ir::ValueRole::Parameter || val.role == ir::ValueRole::State) &&
          plan_.placement[v].buffer != plan::Buffer::None && !weights.count(val.name))
        throw Error("the weights lack '" + val.name + "'");
    }
  // Validated everything first: a bad file changes nothing.
  for (const auto& [name, h] : weights) {
    const int id = graph_.find_value(name);
    if (plan_.placement[id].buffer == plan::Buffer::None) continue;
    std::memcpy(host_view(id).data, h.data.data(), h.data.size());
    upload(id);
  }
  prepared_ = false;
  return loaded;
}

std::vector<std::pair<std::string, std::string>> Executable::kernel_implementations() const {
  std::vector<std::pair<std::string, std::string>> out;
  const std::vector<Bound>* active = steps_;
  for (const std::vector<Bound>* steps : {&hoisted_steps_, active})
    for (const Bound& s : *steps) {
      std::string how = s.kernel->implementation();
      if (!how.empty()) out.emplace_back(s.args.node.name, std::move(how));
    }
  return out;
}

int64_t Executable::parameter_count() const {
  int64_t n = 0;
  for (int v : graph_.values_with_role(ir::ValueRole::Parameter)) n += numel(graph_.value(v).shape);
  return n;
}

size_t Executable::total_bytes() const {
  size_t n = 0;
  for (size_t b : plan_.buffer_bytes) n += b;
  return n;
}

}  // namespace trident::runtime
