// Zoo networks have the published sizes: parameters and forward MACs at 224x224.
#include <gtest/gtest.h>

#include "core/error.h"
#include "frontend/zoo.h"
#include "ir/op_registry.h"

using namespace trident;

namespace {
int64_t params(const ir::Graph& g) {
  int64_t n = 0;
  for (int v : g.values_with_role(ir::ValueRole::Parameter)) n += numel(g.value(v).shape);
  return n;
}
int64_t macs(const ir::Graph& g) {
  int64_t n = 0;
  for (int id : g.order()) n += ir::OpRegistry::get(g.node(id).op).macs(g.node(id), g);
  return n;
}
}  // namespace

TEST(Zoo, ResNet50MatchesPublishedSize) {
  ir::Graph g = frontend::build_model("resnet50", {1});
  EXPECT_EQ(params(g), 25557032);  // torchvision resnet50
  EXPECT_NEAR(macs(g) / 1e9, 4.1, 0.05);
  EXPECT_EQ(g.value(g.outputs()[0]).shape, (Shape{1, 1000}));
}

TEST(Zoo, Vgg16BnMatchesPublishedSize) {
  ir::Graph g = frontend::build_model("vgg16_bn", {1});
  EXPECT_EQ(params(g), 138365992);  // torchvision vgg16_bn
  EXPECT_NEAR(macs(g) / 1e9, 15.5, 0.05);
}

TEST(Zoo, ResNet18AndCifarResNet) {
  EXPECT_EQ(params(frontend::build_model("resnet18", {1})), 11689512);
  ir::Graph r20 = frontend::build_model("resnet_cifar", {4});
  EXPECT_NEAR(params(r20) / 1e6, 0.27, 0.01);  // ResNet-20: 0.27 M
  EXPECT_EQ(r20.value(r20.outputs()[0]).shape, (Shape{4, 10}));
}

TEST(Zoo, DefaultModelIsMadeOfCbrBlocks) {
  ir::Graph g = frontend::build_model(frontend::default_model(), {8});
  int convs = 0, bns = 0, relus = 0;
  for (int id : g.order()) {
    convs += g.node(id).op == "conv2d";
    bns += g.node(id).op == "batchnorm2d";
    relus += g.node(id).op == "relu";
  }
  EXPECT_GE(convs, 2);
  EXPECT_EQ(convs, bns);
  EXPECT_EQ(convs, relus);
  EXPECT_EQ(g.value(0).shape, (Shape{8, 28, 28, 1}));
}

TEST(Zoo, UnknownModelAndUnfittingShapeAreSentences) {
  try {
    frontend::build_model("resnet51", {1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown model 'resnet51'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("resnet50"), std::string::npos);
  }
  try {
    frontend::build_model("fmnist_cnn", {1, 2, 2, 1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("pool"), std::string::npos) << e.what();
  }
  EXPECT_THROW(frontend::build_model("fmnist_cnn", {0}), Error);
}
