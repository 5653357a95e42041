// Runner: a thin layer over Executable for inference — input/output layout conversion at the
// boundary, timing of whole runs, and the statistics `trident infer` prints.
#include "runtime/runner.h"

#include "runtime/checkpoint/weight_file.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "passes/optimizer_kind.h"
#include "core/random.h"
#include "core/tensor_layout.h"

namespace trident::runtime {

namespace {

double percentile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

LatencyStats latency_stats(const std::vector<double>& seconds, int64_t batch) {
  LatencyStats s;
  s.batch = batch;
  s.iterations = static_cast<int>(seconds.size());
  if (seconds.empty()) return s;
  std::vector<double> ms(seconds.size());
  std::transform(seconds.begin(), seconds.end(), ms.begin(), [](double x) { return x * 1e3; });
  std::sort(ms.begin(), ms.end());
  s.total_s = std::accumulate(seconds.begin(), seconds.end(), 0.0);
  s.min_ms = ms.front();
  s.max_ms = ms.back();
  s.mean_ms = s.total_s * 1e3 / static_cast<double>(ms.size());
  s.p50_ms = percentile(ms, 0.50);
  s.p90_ms = percentile(ms, 0.90);
  s.p99_ms = percentile(ms, 0.99);
  s.qps = s.mean_ms > 0 ? 1e3 / s.mean_ms : 0;
  s.throughput = s.qps * static_cast<double>(batch);
  return s;
}

std::vector<std::vector<TopEntry>> top_k(const HostTensor& scores, int k) {
  if (scores.shape.size() != 2)
    throw Error("top-k needs a [batch, classes] output, not " + shape_str(scores.shape));
  const HostTensor f = to_f32(scores, "the output");
  const int64_t rows = scores.shape[0], cols = scores.shape[1];
  const int64_t kk = std::clamp<int64_t>(k, 0, cols);
  const auto* p = reinterpret_cast<const float*>(f.data.data());
  std::vector<std::vector<TopEntry>> out(static_cast<size_t>(rows));
  std::vector<int64_t> idx(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = p + r * cols;
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + kk, idx.end(), [row](int64_t a, int64_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int64_t i = 0; i < kk; ++i) out[r].push_back({idx[i], row[idx[i]]});
  }
  return out;
}

Runner::Runner(const ir::Graph& model, const RunnerOptions& options) {
  passes::CompileOptions opt = options.compile;
  opt.mode = passes::Mode::Infer;
  exe_ = Executable::compile(model, opt, options.backend_options);
  const ir::Graph& g = exe_->graph();
  for (int v : g.values_with_role(ir::ValueRole::Input))
    if (exe_->has(g.value(v).name)) {
      if (input_ >= 0)
        throw Error("the model has more than one input ('" + input_name_ + "', '" + g.value(v).name +
                    "'); trident infer feeds exactly one");
      input_ = v;
      input_name_ = g.value(v).name;
    }
  if (input_ < 0) throw Error("the model has no input tensor");
  outputs_ = g.outputs();
  if (outputs_.empty()) throw Error("the model has no output tensor");
}

size_t Runner::load_weights(const WeightMap& weights, bool strict) {
  WeightMap filtered;
  for (const auto& [name, t] : weights)
    if (!is_training_state(name) || exe_->graph().find_value(name) >= 0) filtered.emplace(name, t);
  return exe_->import_weights(filtered, strict);
}

void Runner::init_random_weights(uint64_t seed) { exe_->init_parameters(seed); }

int64_t Runner::batch() const {
  const Shape& s = exe_->graph().value(input_).shape;
  return s.empty() ? 1 : s[0];
}

Shape Runner::input_shape(Layout layout) const {
  Shape s = exe_->graph().value(input_).shape;
  if (layout == Layout::NCHW && s.size() == 4) s = {s[0], s[3], s[1], s[2]};
  return s;
}

void Runner::set_input(const HostTensor& t, Layout layout, const std::string& what) {
  const Shape want = input_shape(layout);
  if (t.shape != want)
    throw Error(what + " has shape " + shape_str(t.shape) + " but the model's input '" + input_name_ + "' is " +
                shape_str(want) + (layout == Layout::NCHW && want.size() == 4 ? " (NCHW, as in PyTorch and ONNX)" : ""));
  HostTensor f = to_f32(t, what);
  if (layout == Layout::NCHW) f = nchw_to_nhwc(f);
  TensorView dst = exe_->host_view(input_);
  if (dst.dtype != DType::f32) throw Error("the model's input '" + input_name_ + "' is not f32");
  std::memcpy(dst.data, f.data.data(), dst.bytes());
  exe_->upload(input_);
}

void Runner::set_random_input(uint64_t seed) {
  TensorView dst = exe_->host_view(input_);
  if (dst.dtype != DType::f32) throw Error("the model's input '" + input_name_ + "' is not f32");
  Rng rng(seed ^ hash_name(input_name_));
  float* p = dst.as<float>();
  draw_normals(rng, dst.numel(), [p](int64_t i, double x) { p[i] = static_cast<float>(x); });
  exe_->upload(input_);
}

void Runner::run() {
  exe_->run();
  exe_->synchronize();
}

LatencyStats Runner::benchmark(int warmup, int iterations) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) exe_->run();
  exe_->synchronize();
  latencies_.clear();
  latencies_.reserve(static_cast<size_t>(std::max(iterations, 0)));
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = clock::now();
    exe_->run();
    exe_->synchronize();  // latency is until the result exists, also on a GPU
    latencies_.push_back(std::chrono::duration<double>(clock::now() - t0).count());
  }
  return latency_stats(latencies_, batch());
}

std::vector<Runner::NodeTime> Runner::profile(int iterations) {
  std::vector<double> seconds;
  for (int i = 0; i < iterations; ++i) exe_->run_profiled(seconds);
  // Steps are the graph's live nodes in order, less those hoisted out of the step.
  std::vector<NodeTime> out;
  const ir::Graph& g = exe_->graph();
  for (int nid : g.order()) {
    if (exe_->memory_plan().hoisted[nid]) continue;
    const size_t i = out.size();
    out.push_back({g.node(nid).name, g.node(nid).op, i < seconds.size() ? seconds[i] / std::max(iterations, 1) : 0.0});
  }
  return out;
}

std::string Runner::output_name(size_t i) const { return exe_->graph().value(outputs_.at(i)).name; }

HostTensor Runner::output(size_t i, Layout layout) const {
  exe_->download(outputs_.at(i));
  TensorView v = exe_->host_view(outputs_.at(i));
  HostTensor t{v.shape, v.dtype, std::vector<std::byte>(v.bytes())};
  std::memcpy(t.data.data(), v.data, v.bytes());
  return layout == Layout::NCHW ? nhwc_to_nchw(t) : t;
}

}  // namespace trident::runtime
