// join_channel_gradients: structural (a tensor split into channel slices gets its gradient as
// one concat, zero fills in the channels no slice reads, and a whole-tensor reader's gradient
// added to it), negative (overlapping slices keep their adds, with the reason), numerical
// (training steps with and without the pass, bit for bit on the host backends).
#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/builder.h"
#include "passes/pass.h"
#include "runtime/executable.h"
#include "support/graph_queries.h"
#include "support/same_steps.h"

using namespace trident;
using test_support::count_op;

namespace {

struct Slice {
  int64_t start, channels;
};

// conv → the slices of `slices` (each through its own 1×1 conv) → concat → [also the conv's
// output itself, when `whole`] → pool → linear: a ShuffleNet v2 unit's split, generalised.
ir::Graph split_network(const std::vector<Slice>& slices, bool whole) {
  ir::Graph g;
  frontend::Builder b(g);
  const int x = b.input("images", {2, 5, 5, 3});
  const int t = b.relu(b.conv(x, 8, 3, 1, 1, {}, "stem"), "stem.relu");
  std::vector<int> parts;
  for (size_t i = 0; i < slices.size(); ++i) {
    const std::string name = "split." + std::to_string(i);
    const int s = g.add_node1("channel_slice", {t}, {{"start", slices[i].start}, {"channels", slices[i].channels}},
                              name);
    parts.push_back(b.conv(s, 2, 1, 1, 0, {.bias = true}, name + ".conv"));
  }
  if (whole) parts.push_back(t);
  const int c = g.add_node1("concat", parts, {}, "cat");
  g.mark_output(b.linear(b.flatten(b.global_avgpool(c, "pool")), 3, true, "fc"));
  return g;
}

runtime::CompiledGraph compile(const ir::Graph& model, bool join, const std::string& backend = "cpu_ref") {
  passes::CompileOptions o;
  o.mode = passes::Mode::Train;
  o.backend = backend;
  if (!join) o.disabled_passes = {"join_channel_gradients"};
  return runtime::compile_graph(model, o);
}

// Live channel_slice nodes with a negative start or a window past the input: placements.
int placements(const ir::Graph& g) {
  int n = 0;
  for (int id : g.order()) {
    const ir::Node& node = g.node(id);
    if (node.op != "channel_slice") continue;
    const int64_t start = node.attrs.i("start"), cx = g.value(node.inputs[0]).shape.back();
    n += start < 0 || start + node.attrs.i("channels") > cx;
  }
  return n;
}

const passes::FusionRecord* join_record(const runtime::CompiledGraph& c) {
  for (const auto& f : c.fusions)
    if (f.pass == "join_channel_gradients") return &f;
  return nullptr;
}

}  // namespace

TEST(JoinChannelGradients, TwoHalvesGetTheirGradientAsOneConcat) {
  const ir::Graph model = split_network({{0, 4}, {4, 4}}, false);
  const auto joined = compile(model, true), plain = compile(model, false);
  EXPECT_EQ(placements(plain.graph), 2);
  EXPECT_EQ(placements(joined.graph), 0);
  const auto* f = join_record(joined);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->pattern, "slice-gradient-sum");
  EXPECT_EQ(f->nodes.size(), 3u) << "two placements and their add";
  EXPECT_EQ(count_op(joined.graph, "concat"), count_op(plain.graph, "concat") + 1);
  EXPECT_EQ(count_op(joined.graph, "fill"), count_op(plain.graph, "fill"));
}

TEST(JoinChannelGradients, ChannelsNoSliceReadsAreZerosAndAWholeReaderIsAdded) {
  const ir::Graph model = split_network({{0, 2}, {5, 3}}, true);
  const auto joined = compile(model, true), plain = compile(model, false);
  EXPECT_EQ(placements(joined.graph), 0);
  ASSERT_NE(join_record(joined), nullptr);
  EXPECT_EQ(count_op(joined.graph, "fill"), count_op(plain.graph, "fill") + 1) << "channels 2..4 read by no slice";
  int joined_sums = 0;
  for (int id : joined.graph.order())
    joined_sums += joined.graph.node(id).op == "add" && joined.graph.node(id).name.find(".joined.sum") != std::string::npos;
  EXPECT_EQ(joined_sums, 1) << "the gradient through the concat's whole-tensor input";
}

TEST(JoinChannelGradients, OverlappingSlicesKeepTheirAddsWithTheReason) {
  const ir::Graph model = split_network({{0, 5}, {3, 5}}, false);
  const auto c = compile(model, true);
  EXPECT_EQ(join_record(c), nullptr);
  EXPECT_EQ(placements(c.graph), 2);
  const auto it = std::find_if(c.rejections.begin(), c.rejections.end(),
                               [](const passes::Rejection& r) { return r.pass == "join_channel_gradients"; });
  ASSERT_NE(it, c.rejections.end());
  EXPECT_NE(it->reason.find("overlap at channel 3"), std::string::npos) << it->reason;
}

class JoinChannelGradientsSteps : public ::testing::TestWithParam<std::string> {};

// Three training steps with and without the pass: a placement's zeros add nothing, so every
// loss, parameter, momentum and running statistic is equal bit for bit.
TEST_P(JoinChannelGradientsSteps, EqualThePlacedAndAddedStepsBitForBit) {
  const std::vector<std::string> available = KernelRegistry::backends();
  if (std::find(available.begin(), available.end(), GetParam()) == available.end())
    GTEST_SKIP() << "backend " << GetParam() << " is not built here";
  for (bool whole : {false, true}) {
    const ir::Graph model = split_network({{0, 3}, {3, 2}, {6, 2}}, whole);
    passes::CompileOptions o;
    o.mode = passes::Mode::Train;
    o.backend = GetParam();
    auto joined = runtime::Executable::compile(model, o);
    o.disabled_passes = {"join_channel_gradients"};
    auto plain = runtime::Executable::compile(model, o);
    ASSERT_EQ(placements(joined->graph()), 0);
    ASSERT_EQ(placements(plain->graph()), 3);
    test_support::expect_bitwise_same_steps(*joined, *plain, 3, 3);
  }
}

INSTANTIATE_TEST_SUITE_P(HostBackends, JoinChannelGradientsSteps, ::testing::Values("cpu_ref", "cpu"));
