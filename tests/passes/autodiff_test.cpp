// The generated backward graph: every parameter gets a gradient, the data input gets none
// (the first convolution's dgrad is removed by dead-code elimination), and the pipeline's
// switches behave.
#include <gtest/gtest.h>

#include "support/graph_queries.h"

#include <filesystem>
#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "frontend/zoo.h"
#include "passes/pass.h"
#include "runtime/executable.h"

using namespace trident;
using test_support::count_op;

namespace {
passes::CompileOptions train_options(bool optimizer = true) {
  passes::CompileOptions o;
  o.mode = passes::Mode::Train;
  o.optimizer = optimizer;
  return o;
}
}  // namespace

TEST(Autodiff, FirstConvolutionHasNoInputGradient) {
  ir::Graph model = frontend::build_model("fmnist_cnn", {4});
  const int convs = count_op(model, "conv2d");
  auto c = runtime::compile_graph(model, train_options());
  EXPECT_EQ(count_op(c.graph, "conv2d_backward_weight"), convs);
  EXPECT_EQ(count_op(c.graph, "conv2d_backward_data"), convs - 1);
  const int images = c.graph.find_value("images");
  for (int id : c.graph.order()) {
    const ir::Node& n = c.graph.node(id);
    if (n.op != "conv2d_backward_data") continue;
    Shape dx = c.graph.value(n.outputs[0]).shape;
    EXPECT_NE(dx, c.graph.value(images).shape) << n.name << " computes the image gradient";
  }
}

TEST(Autodiff, WithoutDeadCodeEliminationTheDataGradientIsStillThere) {
  ir::Graph model = frontend::build_model("fmnist_cnn", {4});
  auto o = train_options();
  o.disabled_passes = {"dce"};
  auto c = runtime::compile_graph(model, o);
  EXPECT_EQ(count_op(c.graph, "conv2d_backward_data"), count_op(model, "conv2d"));
}

TEST(Autodiff, EveryParameterGetsAGradientAndResidualsAreSummed) {
  ir::Graph model = frontend::build_model("resnet_cifar", {2});
  auto o = train_options(false);
  o.disabled_passes = {"fuse_conv_bn_relu", "fuse_elementwise"};  // count the unfused ops
  auto c = runtime::compile_graph(model, o);
  EXPECT_EQ(c.param_grads.size(), model.values_with_role(ir::ValueRole::Parameter).size());
  for (auto [p, gp] : c.param_grads) EXPECT_EQ(c.graph.value(p).shape, c.graph.value(gp).shape);
  // Each residual block's input is read by the block and by its shortcut: two gradients summed.
  EXPECT_GE(count_op(c.graph, "add"), 9 + 9);
  EXPECT_EQ(count_op(c.graph, "batchnorm2d_backward"), count_op(model, "batchnorm2d"));
}

TEST(Autodiff, TrainingGraphEndsInOneOptimizerStep) {
  auto c = runtime::compile_graph(frontend::build_model("fmnist_cnn", {4}), train_options());
  EXPECT_EQ(count_op(c.graph, "sgd_update"), 1);
  EXPECT_EQ(c.graph.node(c.graph.order().back()).op, "sgd_update");
}

TEST(Pipeline, InferenceUsesRunningStatisticsAndNoBackward) {
  passes::CompileOptions o;
  o.mode = passes::Mode::Infer;
  auto c = runtime::compile_graph(frontend::build_model("fmnist_cnn", {4}), o);
  for (int id : c.graph.order()) {
    const ir::Node& n = c.graph.node(id);
    EXPECT_EQ(n.op.find("backward"), std::string::npos);
    if (n.op == "batchnorm2d") {
      EXPECT_EQ(n.attrs.i("training"), 0);
    }
  }
}

TEST(Pipeline, UnknownOrRequiredPassCannotBeDisabled) {
  ir::Graph model = frontend::build_model("fmnist_cnn", {4});
  auto o = train_options();
  o.disabled_passes = {"no_such_pass"};
  EXPECT_THROW(runtime::compile_graph(model, o), Error);
  o.disabled_passes = {"autodiff"};
  EXPECT_THROW(runtime::compile_graph(model, o), Error);
}

TEST(Pipeline, DumpWritesTheGraphAfterEveryPass) {
  auto dir = std::filesystem::temp_directory_path() / "trident_dump_test";
  std::filesystem::remove_all(dir);
  auto o = train_options();
  o.dump_dir = dir.string();
  runtime::compile_graph(frontend::build_model("fmnist_cnn", {2}), o);
  EXPECT_TRUE(std::filesystem::exists(dir / "00_input.txt"));
  // One file per pass of the pipeline, numbered by its position in it: the list comes from
  // the pipeline itself, so a pass added to it needs no change here.
  const passes::PassManager manager = passes::standard_pipeline(o.mode, runtime::with_backend_traits(o));
  const auto& pipeline = manager.passes();
  ASSERT_GE(pipeline.size(), 8u);
  for (size_t i = 0; i < pipeline.size(); ++i) {
    std::ostringstream name;
    name << std::setw(2) << std::setfill('0') << i + 1 << "_" << pipeline[i].name << ".txt";
    EXPECT_TRUE(std::filesystem::exists(dir / name.str())) << name.str();
  }
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, pipeline.size() + 1);
  std::filesystem::remove_all(dir);
}
