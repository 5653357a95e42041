// Tests for the inference Runner: latency statistics (ordered percentiles, throughput equal to
// batch / mean latency), top-k, NCHW input handling against the Executable's NHWC view, and
// weight loading that skips optimizer momentum but refuses unknown tensors.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "core/tensor_layout.h"
#include "frontend/zoo.h"
#include "runtime/npy.h"
#include "runtime/runner.h"

using namespace trident;
using runtime::HostTensor;

namespace {

HostTensor ramp(Shape shape) {
  HostTensor t{shape, DType::f32, std::vector<std::byte>(static_cast<size_t>(numel(shape)) * 4)};
  auto* p = reinterpret_cast<float*>(t.data.data());
  for (int64_t i = 0; i < numel(shape); ++i) p[i] = static_cast<float>(i % 17) * 0.1f - 0.8f;
  return t;
}

}  // namespace

TEST(Runner, LatencyStatsOfKnownSamples) {
  std::vector<double> s;
  for (int i = 1; i <= 101; ++i) s.push_back(i * 1e-3);  // 1..101 ms, shuffled below
  std::swap(s[0], s[100]);
  auto st = runtime::latency_stats(s, 4);
  EXPECT_EQ(st.iterations, 101);
  EXPECT_DOUBLE_EQ(st.min_ms, 1.0);
  EXPECT_DOUBLE_EQ(st.max_ms, 101.0);
  EXPECT_NEAR(st.mean_ms, 51.0, 1e-9);
  EXPECT_NEAR(st.p50_ms, 51.0, 1e-9);
  EXPECT_NEAR(st.p90_ms, 91.0, 1e-9);
  EXPECT_NEAR(st.p99_ms, 100.0, 1e-9);
  EXPECT_NEAR(st.throughput, 4 * 1000.0 / 51.0, 1e-9);
  EXPECT_EQ(runtime::latency_stats({}, 1).iterations, 0);
}

TEST(Runner, TopKOrdersByScoreThenIndex) {
  HostTensor t{{2, 4}, DType::f32, std::vector<std::byte>(32)};
  const float v[8] = {0.1f, 3.0f, 3.0f, -1.0f, 5.0f, 4.0f, 3.0f, 2.0f};
  std::memcpy(t.data.data(), v, 32);
  auto top = runtime::top_k(t, 3);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0][0].index, 1);
  EXPECT_EQ(top[0][1].index, 2);
  EXPECT_EQ(top[0][2].index, 0);
  EXPECT_EQ(top[1][0].index, 0);
  EXPECT_FLOAT_EQ(top[1][0].score, 5.0f);
  EXPECT_EQ(runtime::top_k(t, 10)[0].size(), 4u);
}

TEST(Runner, BenchmarksAZooModel) {
  ir::Graph g = frontend::build_model("fmnist_cnn", {4});
  runtime::Runner r(g);
  r.init_random_weights(3);
  EXPECT_EQ(r.batch(), 4);
  EXPECT_EQ(r.input_shape(), (Shape{4, 1, 28, 28}));
  EXPECT_EQ(r.input_shape(runtime::Layout::NHWC), (Shape{4, 28, 28, 1}));
  r.set_random_input(5);
  auto st = r.benchmark(2, 12);
  EXPECT_EQ(st.iterations, 12);
  EXPECT_EQ(r.latencies_s().size(), 12u);
  EXPECT_GT(st.min_ms, 0);
  EXPECT_LE(st.min_ms, st.p50_ms);
  EXPECT_LE(st.p50_ms, st.p90_ms);
  EXPECT_LE(st.p90_ms, st.p99_ms);
  EXPECT_LE(st.p99_ms, st.max_ms);
  EXPECT_LE(st.min_ms, st.mean_ms);
  EXPECT_LE(st.mean_ms, st.max_ms);
  EXPECT_NEAR(st.throughput, 4 * 1000.0 / st.mean_ms, 1e-6 * st.throughput);
  EXPECT_NEAR(st.total_s * 1e3, st.mean_ms * 12, 1e-6);
  HostTensor out = r.output();
  EXPECT_EQ(out.shape, (Shape{4, 10}));
  EXPECT_EQ(r.num_outputs(), 1u);
  auto prof = r.profile(2);
  EXPECT_FALSE(prof.empty());
  for (const auto& n : prof) EXPECT_GE(n.seconds, 0.0);
}

TEST(Runner, NchwInputMatchesNhwcInputAndIsDeterministic) {
  ir::Graph g = frontend::build_model("fmnist_cnn", {2});
  runtime::RunnerOptions on_ref;
  on_ref.compile.backend = "cpu_ref";
  runtime::Runner a(g, on_ref), b(g, on_ref);
  a.init_random_weights(1);
  b.init_random_weights(1);
  const HostTensor nchw = ramp({2, 1, 28, 28});
  a.set_input(nchw);
  b.set_input(nchw_to_nhwc(nchw), runtime::Layout::NHWC);
  a.run();
  b.run();
  EXPECT_EQ(a.output().data, b.output().data);
  // The input view holds NHWC data.
  TensorView in = a.executable().find(a.input_name());
  EXPECT_EQ(std::memcmp(in.data, nchw_to_nhwc(nchw).data.data(), in.bytes()), 0);
}

TEST(Runner, RefusesAnInputOfTheWrongShape) {
  runtime::Runner r(frontend::build_model("fmnist_cnn", {2}));
  try {
    r.set_input(ramp({2, 28, 28, 1}), runtime::Layout::NCHW, "'x.npy'");
    ADD_FAILURE();
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("'x.npy'"), std::string::npos) << w;
    EXPECT_NE(w.find("[2,1,28,28]"), std::string::npos) << w;
  }
}

TEST(Runner, LoadsWeightsSkippingMomentumButNotUnknownNames) {
  ir::Graph g = frontend::build_model("fmnist_cnn", {1});
  runtime::Runner src(g), dst(g);
  src.init_random_weights(7);
  runtime::WeightMap w = src.executable().export_weights();
  const size_t n = w.size();
  w["fc.weight.momentum"] = w.at("fc.weight");
  EXPECT_EQ(dst.load_weights(w, true), n);
  src.set_random_input(1);
  dst.set_random_input(1);
  src.run();
  dst.run();
  EXPECT_EQ(src.output().data, dst.output().data);
  w["not_a_tensor"] = w.at("fc.bias");
  EXPECT_THROW(dst.load_weights(w, false), Error);
  w.erase("not_a_tensor");
  w.erase("fc.bias");
  EXPECT_THROW(dst.load_weights(w, true), Error);
}
