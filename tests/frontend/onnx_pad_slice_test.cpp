// ONNX Pad, Slice and Split as trident imports them (tests/onnx/make_models.py's pad_block and
// split_block; their outputs against onnxruntime's are onnx_import_test's): which Pads become
// their reader's own padding and which stay pad2d nodes, which Slices and Splits become
// channel_slice nodes, and that both models train — the loss of a fixed batch falls, on every
// host backend, and join_channel_gradients changes no bit of a step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/random.h"
#include "frontend/onnx/onnx_import.h"
#include "runtime/executable.h"
#include "support/graph_queries.h"

namespace trident {
namespace {

namespace fs = std::filesystem;
using test_support::count_op;

const fs::path kDir = TRIDENT_ONNX_MODELS;

#define REQUIRE_MODEL(file)                                                                 \
  do {                                                                                      \
    if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";           \
    if (!fs::exists(kDir / (file))) GTEST_SKIP() << "no " << (file) << " (needs the .venv)"; \
  } while (0)

std::vector<const ir::Node*> nodes_of(const ir::Graph& g, const std::string& op) {
  std::vector<const ir::Node*> out;
  for (int id : g.order())
    if (g.node(id).op == op) out.push_back(&g.node(id));
  return out;
}

TEST(OnnxPadSlice, ZeroPadsBecomeTheirReadersPaddingWhereThatReadsTheSame) {
  for (const char* file : {"pad_block_op13.onnx", "pad_block_op18.onnx"}) {
    SCOPED_TRACE(file);
    REQUIRE_MODEL(file);
    const frontend::OnnxImport imp = frontend::import_onnx((kDir / file).string(), {2});
    const ir::Graph& g = imp.graph;
    // Left: the -0.75 Pad, the zero Pad before a MaxPool of a MaxPool, and the crop.
    const auto pads = nodes_of(g, "pad2d");
    ASSERT_EQ(pads.size(), 3u);
    EXPECT_EQ(pads[0]->attrs.ints("pads"), (std::vector<int64_t>{1, 0, 0, 2}));
    EXPECT_EQ(pads[0]->attrs.f("value"), -0.75);
    EXPECT_EQ(pads[1]->attrs.ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
    EXPECT_EQ(pads[1]->attrs.f("value"), 0.0);
    EXPECT_EQ(pads[2]->attrs.ints("pads"), (std::vector<int64_t>{0, -1, -1, 0}));
    // Taken: the Conv's, the second AveragePool's (now counting its padding) and the MaxPool of a Relu's.
    const auto convs = nodes_of(g, "conv2d");
    ASSERT_EQ(convs.size(), 2u);
    EXPECT_EQ(convs[1]->attrs.ints("padding"), (std::vector<int64_t>{1, 1}));
    const auto avg = nodes_of(g, "avgpool2d");
    ASSERT_EQ(avg.size(), 2u);
    EXPECT_EQ(avg[0]->attrs.ints("padding"), (std::vector<int64_t>{0, 0}));  // DenseNet's all-zero Pad: gone
    EXPECT_EQ(avg[0]->attrs.i("count_include_pad"), 0);
    EXPECT_EQ(avg[1]->attrs.ints("padding"), (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(avg[1]->attrs.i("count_include_pad"), 1);
    const auto max = nodes_of(g, "maxpool2d");
    ASSERT_EQ(max.size(), 3u);
    EXPECT_EQ(max[0]->attrs.ints("padding"), (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(max[1]->attrs.ints("padding"), (std::vector<int64_t>{0, 0}));
    EXPECT_EQ(max[2]->attrs.ints("padding"), (std::vector<int64_t>{0, 0}));
  }
}

TEST(OnnxPadSlice, ChannelSlicesAndSplitsBecomeChannelSlices) {
  for (const char* file : {"split_block_op13.onnx", "split_block_op18.onnx"}) {
    SCOPED_TRACE(file);
    REQUIRE_MODEL(file);
    const bool op18 = std::string(file).find("op18") != std::string::npos;
    const frontend::OnnxImport imp = frontend::import_onnx((kDir / file).string(), {3});
    const auto slices = nodes_of(imp.graph, "channel_slice");
    using Window = std::pair<int64_t, int64_t>;
    std::vector<Window> got;
    for (const ir::Node* n : slices) got.push_back({n->attrs.i("start"), n->attrs.i("channels")});
    // chunk(2): [0, 4) and [4, 8); the Split; channels 3.. of the reordered concat; features 2..6.
    std::vector<Window> want{{0, 4}, {4, 4}};
    if (op18) want.insert(want.end(), {{0, 3}, {3, 3}, {6, 2}});
    else want.insert(want.end(), {{0, 3}, {3, 5}});
    want.insert(want.end(), {{3, 5}, {2, 5}});
    EXPECT_EQ(got, want);
    EXPECT_EQ(imp.graph.value(imp.graph.outputs().at(0)).shape, (Shape{3, 5}));
  }
}

// A fixed batch of the imported model trained with SGD on `backend`; the losses of `steps`
// steps. `join` off disables join_channel_gradients.
struct Trained {
  std::vector<float> losses;
  std::unique_ptr<runtime::Executable> exe;
};
Trained train(const std::string& file, const std::string& backend, int steps, bool join = true) {
  frontend::OnnxOptions io;
  io.batch = 6;
  io.train = true;
  const frontend::OnnxImport imp = frontend::import_onnx((kDir / file).string(), io);
  passes::CompileOptions o;
  o.mode = passes::Mode::Train;
  o.backend = backend;
  if (!join) o.disabled_passes = {"join_channel_gradients"};
  Trained r;
  r.exe = runtime::Executable::compile(imp.graph, o);
  r.exe->init_parameters(1);  // the momentum buffers; every weight then comes from the file
  r.exe->import_weights(imp.weights, false);
  Rng rng(4);
  TensorView x = r.exe->find(imp.input_name), labels = r.exe->find("labels");
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
  for (int64_t i = 0; i < labels.numel(); ++i) labels.as<int32_t>()[i] = static_cast<int32_t>(i % 5);
  r.exe->find("lr").as<float>()[0] = 0.05f;
  for (int s = 0; s < steps; ++s) {
    r.exe->run();
    r.losses.push_back(r.exe->view(r.exe->loss()).as<float>()[0]);
  }
  return r;
}

class OnnxPadSliceTraining : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxPadSliceTraining, TheLossOfAFixedBatchFalls) {
  const std::vector<std::string> available = KernelRegistry::backends();
  if (std::find(available.begin(), available.end(), GetParam()) == available.end())
    GTEST_SKIP() << "backend " << GetParam() << " is not built here";
  for (const char* file : {"pad_block_op18.onnx", "split_block_op13.onnx", "split_block_op18.onnx"}) {
    SCOPED_TRACE(file);
    REQUIRE_MODEL(file);
    const Trained r = train(file, GetParam(), 30);
    EXPECT_LT(r.losses.back(), 0.5 * r.losses.front()) << "first " << r.losses.front() << ", last " << r.losses.back();
  }
}

// ShuffleNet's chunk(2) gradient as one concat, or as the two placed halves added: the same bits.
TEST_P(OnnxPadSliceTraining, JoiningTheSplitsGradientChangesNoBit) {
  const std::vector<std::string> available = KernelRegistry::backends();
  if (std::find(available.begin(), available.end(), GetParam()) == available.end())
    GTEST_SKIP() << "backend " << GetParam() << " is not built here";
  REQUIRE_MODEL("split_block_op18.onnx");
  const Trained joined = train("split_block_op18.onnx", GetParam(), 3), plain = train("split_block_op18.onnx", GetParam(), 3, false);
  EXPECT_EQ(joined.losses, plain.losses);
  int compared = 0;
  const ir::Graph& g = plain.exe->graph();
  for (int v = 0; v < g.num_values(); ++v) {
    if (g.value(v).role != ir::ValueRole::Parameter && g.value(v).role != ir::ValueRole::State) continue;
    const TensorView want = plain.exe->view(v), got = joined.exe->find(g.value(v).name);
    ASSERT_EQ(want.bytes(), got.bytes()) << g.value(v).name;
    EXPECT_EQ(std::memcmp(want.data, got.data, want.bytes()), 0) << g.value(v).name;
    ++compared;
  }
  EXPECT_GT(compared, 10);
}

INSTANTIATE_TEST_SUITE_P(HostBackends, OnnxPadSliceTraining, ::testing::Values("cpu_ref", "cpu"));

}  // namespace
}  // namespace trident
