// The memory planner never lets two simultaneously live tensors overlap, shares memory
// between tensors whose lifetimes do not overlap, and mirrors parameters in the gradients.
#include <gtest/gtest.h>

#include "backends/cuda/dgrad_beside_wgrad.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"

using namespace trident;

namespace {
void expect_no_live_overlap(const plan::MemoryPlan& p) {
  const auto& b = p.arena_blocks;
  for (size_t i = 0; i < b.size(); ++i)
    for (size_t j = i + 1; j < b.size(); ++j) {
      bool live_together = b[i].first <= b[j].last && b[j].first <= b[i].last;
      bool overlap = b[i].offset < b[j].offset + b[j].bytes && b[j].offset < b[i].offset + b[i].bytes;
      ASSERT_FALSE(live_together && overlap) << "blocks of values " << b[i].root << " and " << b[j].root;
    }
  for (const auto& blk : b) EXPECT_LE(blk.offset + blk.bytes, p.bytes(plan::Buffer::Arena));
}

runtime::CompiledGraph compile(const std::string& model, passes::Mode mode, int64_t batch) {
  passes::CompileOptions o;
  o.mode = mode;
  return runtime::compile_graph(frontend::build_model(model, {batch}), o);
}
}  // namespace

TEST(MemoryPlan, NoOverlapAndRealSharingWhenTraining) {
  for (const char* m : {"fmnist_cnn", "resnet_cifar"}) {
    auto c = compile(m, passes::Mode::Train, 4);
    expect_no_live_overlap(c.plan);
    EXPECT_LT(c.plan.bytes(plan::Buffer::Arena), c.plan.arena_unshared_bytes) << m;
  }
}

TEST(MemoryPlan, InferenceArenaIsMuchSmallerThanAllTensors) {
  // The planner's own sharing, on the unfused graph (fusion and in-place epilogues remove
  // tensors before the planner sees them).
  passes::CompileOptions o;
  o.mode = passes::Mode::Infer;
  o.disabled_passes = {"fold_bn", "fuse_conv_epilogue", "fuse_elementwise", "reuse_residual_buffer"};
  auto c = runtime::compile_graph(frontend::build_model("resnet18", {2}), o);
  expect_no_live_overlap(c.plan);
  EXPECT_LT(c.plan.bytes(plan::Buffer::Arena) * 3, c.plan.arena_unshared_bytes);
  auto fused = compile("resnet18", passes::Mode::Infer, 2);
  expect_no_live_overlap(fused.plan);
  EXPECT_LT(fused.plan.bytes(plan::Buffer::Arena), c.plan.bytes(plan::Buffer::Arena));
}

TEST(MemoryPlan, GradientsMirrorParametersAndViewsShareStorage) {
  auto c = compile("fmnist_cnn", passes::Mode::Train, 4);
  EXPECT_EQ(c.plan.bytes(plan::Buffer::Grads), c.plan.bytes(plan::Buffer::Params));
  for (auto [p, gp] : c.param_grads) {
    EXPECT_EQ(c.plan.placement[gp].buffer, plan::Buffer::Grads);
    EXPECT_EQ(c.plan.placement[gp].offset, c.plan.placement[p].offset);
  }
  for (int id : c.graph.order()) {
    const ir::Node& n = c.graph.node(id);
    if (n.op == "flatten") {
      EXPECT_EQ(c.plan.placement[n.outputs[0]].offset, c.plan.placement[n.inputs[0]].offset);
      EXPECT_EQ(c.plan.placement[n.outputs[0]].buffer, c.plan.placement[n.inputs[0]].buffer);
    }
    if (n.op == "batchnorm2d") {  // running statistics are updated in place
      EXPECT_EQ(c.plan.placement[n.outputs[3]].buffer, plan::Buffer::State);
      EXPECT_EQ(c.plan.placement[n.outputs[3]].offset, c.plan.placement[n.inputs[3]].offset);
    }
  }
}

// Two nodes that run at once (the cuda backend's side stream: a dgrad beside the wgrad of the
// same dy) must not write where the other reads. ResNet-18's f16 training graph for cuda (the
// passes need only the backend's traits, so this runs without a GPU): planned one node after
// the other, a wgrad's dw takes the bytes of the f16 weight copy that its dgrad read last,
// which raced when the dgrad ran beside it; planned with the pairs as concurrent, no arena
// tensor of one node overlaps one of the other.
TEST(MemoryPlan, NodesThatRunAtOnceShareNoMemory) {
#ifndef TRIDENT_HAVE_CUDA
  GTEST_SKIP() << "this build has no cuda backend, whose traits the f16 training graph needs";
#else
  passes::CompileOptions o;
  o.mode = passes::Mode::Train;
  o.backend = "cuda";
  o.precision = DType::f16;
  auto c = runtime::compile_graph(frontend::build_model("resnet18", {.batch = 8, .height = 32, .width = 32}), o);
  std::vector<int> pairs;
  for (int i = 0; i + 1 < static_cast<int>(c.graph.order().size()); ++i)
    if (cuda::dgrad_then_wgrad(c.graph, i)) pairs.push_back(i);
  ASSERT_GT(pairs.size(), 10u);
  auto shared_pairs = [&](const plan::MemoryPlan& p) {
    int shared = 0;
    for (int i : pairs) {
      const ir::Node &a = c.graph.node(c.graph.order()[i]), &b = c.graph.node(c.graph.order()[i + 1]);
      bool overlap = false;
      for (const ir::Node* n : {&a, &b}) {
        const ir::Node& other = n == &a ? b : a;
        for (int out : n->outputs)
          for (const std::vector<int>* touched : {&other.inputs, &other.outputs})
            for (int v : *touched) {
              const plan::Placement &x = p.placement[out], &y = p.placement[v];
              overlap |= x.buffer == plan::Buffer::Arena && y.buffer == plan::Buffer::Arena &&
                         x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
            }
      }
      shared += overlap;
    }
    return shared;
  };
  EXPECT_GT(shared_pairs(c.plan), 0) << "planned one after the other, no pair shares memory: the test lost its point";
  const plan::MemoryPlan apart = plan::plan_memory(c.graph, c.param_grads, false, pairs);
  EXPECT_EQ(shared_pairs(apart), 0);
  expect_no_live_overlap(apart);
#endif
}
