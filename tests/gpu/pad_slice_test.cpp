// pad2d and channel_slice on the GPU (ONNX Pad, Slice and Split; concat's backward): the
// kernels move bits exactly as cpu_ref does, in every dtype, through the 16-byte units and the
// narrow ones (odd channel counts, misaligned tensors); and a network built of them — a pad2d,
// a channel split, concats, a shuffle — trains on cuda as on cpu_ref, with and without
// join_channel_gradients, and its loss falls. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/random.h"
#include "frontend/builder.h"
#include "runtime/executable.h"
#include "support/gpu_compare.h"
#include "support/graph_queries.h"

namespace trident {
namespace {

test_support::GraphBuild pad(const Shape& x, std::vector<int64_t> pads, double value) {
  return [=](DType t) {
    ir::Graph g;
    g.add_node1("pad2d", {g.add_input("x", x, t)}, {{"pads", pads}, {"value", value}}, "y");
    return g;
  };
}

test_support::GraphBuild slice(const Shape& x, int64_t start, int64_t channels) {
  return [=](DType t) {
    ir::Graph g;
    g.add_node1("channel_slice", {g.add_input("x", x, t)}, {{"start", start}, {"channels", channels}}, "y");
    return g;
  };
}

TEST(CudaPadSlice, PadMovesBitsExactlyAsTheReference) {
  TRIDENT_REQUIRE_GPU();
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (int64_t misalign : {0, 1}) {
      test_support::check_rounded_reference(pad({2, 5, 7, 3}, {1, 2, 0, 3}, 0.0), t, {"y"}, 3, misalign);
      test_support::check_rounded_reference(pad({2, 4, 4, 16}, {2, 1, 2, 1}, -1.5), t, {"y"}, 4, misalign);
      test_support::check_rounded_reference(pad({1, 6, 5, 8}, {-1, 2, -2, -1}, 0.25), t, {"y"}, 5, misalign);
    }
}

TEST(CudaPadSlice, ChannelSliceMovesBitsExactlyAsTheReference) {
  TRIDENT_REQUIRE_GPU();
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (int64_t misalign : {0, 1}) {
      test_support::check_rounded_reference(slice({2, 3, 4, 16}, 8, 8), t, {"y"}, 6, misalign);
      test_support::check_rounded_reference(slice({2, 3, 4, 12}, 3, 5), t, {"y"}, 7, misalign);
      test_support::check_rounded_reference(slice({2, 3, 4, 8}, -8, 16), t, {"y"}, 8, misalign);
      test_support::check_rounded_reference(slice({2, 2, 3, 7}, -3, 13), t, {"y"}, 9, misalign);
      test_support::check_rounded_reference(slice({5, 1001}, 500, 400), t, {"y"}, 10, misalign);
    }
}

// stem → pad2d → conv → split in halves (one through a conv) → concat → shuffle → dense concat
// with the split tensor → pool → linear: DenseNet's and ShuffleNet v2's imported ops.
ir::Graph dense_shuffle_network() {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("images", {8, 12, 12, 3});
  int a = b.relu(b.batchnorm(b.conv(x, 16, 3, 1, 1, {}, "conv1"), "bn1"), "relu1");
  a = g.add_node1("pad2d", {a}, {{"pads", std::vector<int64_t>{1, 0, 1, 2}}, {"value", 0.5}}, "pad");
  const int t = b.relu(b.batchnorm(b.conv(a, 16, 3, 1, 0, {}, "conv2"), "bn2"), "relu2");  // [8, 12, 13, 16]
  const int s0 = g.add_node1("channel_slice", {t}, {{"start", int64_t{0}}, {"channels", int64_t{8}}}, "split.0");
  const int s1 = g.add_node1("channel_slice", {t}, {{"start", int64_t{8}}, {"channels", int64_t{8}}}, "split.1");
  const int br = b.relu(b.batchnorm(b.conv(s1, 8, 1, 1, 0, {}, "branch"), "branch.bn"), "branch.relu");
  int c = g.add_node1("concat", {s0, br}, {}, "cat");
  c = g.add_node1("channel_shuffle", {c}, {{"groups", int64_t{2}}}, "shuffle");
  c = g.add_node1("concat", {c, t}, {}, "dense");
  c = b.avgpool(c, 2, 2, 0, "pool");
  g.mark_output(b.linear(b.flatten(b.global_avgpool(c, "gap")), 10, true, "fc"));
  return g;
}

std::unique_ptr<runtime::Executable> compile(const std::string& backend, std::vector<std::string> disabled = {},
                                             DType precision = DType::f32) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = backend;
  opt.precision = precision;
  opt.disabled_passes = std::move(disabled);
  auto exe = runtime::Executable::compile(dense_shuffle_network(), opt);
  exe->init_parameters(42);
  Rng rng(9);
  for (const char* name : {"images", "labels", "lr"}) {
    const int id = exe->value_id(name);
    TensorView v = exe->host_view(id);
    for (int64_t i = 0; i < v.numel(); ++i) {
      if (v.dtype == DType::i32) v.as<int32_t>()[i] = static_cast<int32_t>(rng.next() % 10);
      else if (std::string(name) == "lr") v.as<float>()[i] = 0.05f;
      else v.as<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
    }
    exe->upload(id);
  }
  return exe;
}

std::vector<double> floats(const runtime::Executable& exe, int id) {
  exe.download(id);
  const TensorView t = exe.host_view(id);
  return std::vector<double>(t.as<float>(), t.as<float>() + t.numel());
}

// Parameters (with running statistics) and momentum buffers (the gradients, after one step) of
// `a` against `b`, each as one vector by relative L2 error (see network_test.cpp for why).
void expect_same_step(const runtime::Executable& a, const runtime::Executable& b, double values, double gradients,
                      const std::string& what) {
  std::vector<double> pa, pb, ga, gb;
  for (int v = 0; v < a.graph().num_values(); ++v) {
    const ir::Value& val = a.graph().value(v);
    if ((val.role != ir::ValueRole::Parameter && val.role != ir::ValueRole::State) || val.name.rfind("amp.", 0) == 0 ||
        !b.has(val.name))
      continue;
    const std::vector<double> x = floats(a, v), y = floats(b, b.value_id(val.name));
    auto& to_a = val.name.ends_with(".momentum") ? ga : pa;
    auto& to_b = val.name.ends_with(".momentum") ? gb : pb;
    to_a.insert(to_a.end(), x.begin(), x.end());
    to_b.insert(to_b.end(), y.begin(), y.end());
  }
  ASSERT_GT(ga.size(), 0u) << what;
  test_support::expect_close_norm(pa, pb, values, what + ": parameters and statistics");
  test_support::expect_close_norm(ga, gb, gradients, what + ": gradients");
  test_support::expect_close_norm(floats(a, a.loss()), floats(b, b.loss()), values, what + ": loss");
}

bool tf32_disabled() {
  const char* v = std::getenv("NVIDIA_TF32_OVERRIDE");
  return v && std::string(v) == "0";
}

TEST(CudaPadSlice, ATrainingStepMatchesCpuRefJoinedOrNot) {
  TRIDENT_REQUIRE_GPU();
  auto ref = compile("cpu_ref");
  ref->run();
  // f32 runs on TF32 tensor cores unless NVIDIA_TF32_OVERRIDE=0: then the f16 row of network_test.cpp.
  const double values = tf32_disabled() ? 1e-3 : 2e-2, gradients = tf32_disabled() ? 2e-2 : 2e-1;
  for (bool join : {true, false}) {
    auto gpu = compile("cuda", join ? std::vector<std::string>{} : std::vector<std::string>{"join_channel_gradients"});
    EXPECT_GT(test_support::count_op(gpu->graph(), "channel_slice"), 0);
    gpu->run();
    gpu->synchronize();
    expect_same_step(*gpu, *ref, values, gradients, join ? "joined" : "placed and added");
  }
  for (DType p : {DType::f16, DType::bf16}) {
    auto amp = compile("cuda", {}, p);
    amp->run();
    amp->synchronize();
    expect_same_step(*amp, *ref, p == DType::f16 ? 2e-2 : 5e-2, p == DType::f16 ? 2e-1 : 4e-1, std::string(dtype_name(p)));
  }
}

TEST(CudaPadSlice, TheLossOfAFixedBatchFalls) {
  TRIDENT_REQUIRE_GPU();
  auto gpu = compile("cuda");
  std::vector<double> losses;
  for (int step = 0; step < 30; ++step) {
    gpu->run();
    losses.push_back(floats(*gpu, gpu->loss())[0]);
  }
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << "first " << losses.front() << ", last " << losses.back();
}

}  // namespace
}  // namespace trident
