// What PyTorch's exporters write that an importer must read right (models from
// tests/onnx/make_models.py): the dynamo exporter with optimize=False (a bias-free convolution's
// zero bias from Expand/CastLike, ReduceMean's axes a reshaped constant, Dropout with its inputs)
// imports without a parameter PyTorch does not have and trains fused; its in-place dropout
// (RandomUniformLike → Less → Cast → Div → Mul) is one dropout when training and nothing in
// inference; and a file whose batch norms an exporter folded away says so when imported for
// training. The numbers of the unoptimized file against onnxruntime are in onnx_import_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "frontend/onnx/onnx_import.h"
#include "runtime/executable.h"
#include "support/onnx_models.h"

namespace trident {
namespace {

namespace fs = std::filesystem;
const fs::path kDir = test_support::kOnnxModels;


frontend::OnnxImport import(const std::string& file, bool train, int64_t batch = 0) {
  frontend::OnnxOptions o;
  o.train = train;
  o.batch = batch;
  return frontend::import_onnx((kDir / file).string(), o);
}

std::map<std::string, int> op_counts(const ir::Graph& g) {
  std::map<std::string, int> ops;
  for (int nid : g.order()) ++ops[g.node(nid).op];
  return ops;
}

TEST(OnnxPyTorchForms, UnoptimizedDynamoExportHasTheModelsParametersOnly) {
  REQUIRE_ONNX_MODELS();
  for (bool train : {false, true}) {
    const auto imp = import(train ? "dynamo_unoptimized_training.onnx" : "dynamo_unoptimized.onnx", train, 8);
    std::vector<std::string> names;
    for (const auto& [name, t] : imp.weights) names.push_back(name);
    // The zero bias the exporter computes is no parameter: conv.bias does not exist in PyTorch.
    EXPECT_EQ(names, (std::vector<std::string>{"bn.bias", "bn.running_mean", "bn.running_var", "bn.weight", "conv.weight",
                                               "fc.bias", "fc.weight"}))
        << (train ? "training" : "inference");
    for (int nid : imp.graph.order()) {
      if (imp.graph.node(nid).op == "conv2d") { EXPECT_EQ(imp.graph.node(nid).inputs.size(), 2u); }
    }
    // The trace's batch of 2 in the head's Reshape follows the batch being compiled.
    EXPECT_EQ(imp.graph.value(imp.graph.outputs()[0]).shape, (Shape{8, 4}));
    const auto ops = op_counts(imp.graph);
    EXPECT_EQ(ops.count("dropout") ? ops.at("dropout") : 0, train ? 1 : 0);
  }
  // Trained, its Conv → BN → ReLU is one cbr and its dropout a mask and a mul.
  const auto imp = import("dynamo_unoptimized_training.onnx", true, 8);
  passes::CompileOptions o;
  o.mode = passes::Mode::Train;
  o.backend = "cpu_ref";
  const auto c = runtime::compile_graph(imp.graph, o);
  const auto ops = op_counts(c.graph);
  EXPECT_EQ(ops.at("cbr"), 1);
  EXPECT_EQ(ops.at("dropout_mask"), 1);
  for (int nid : imp.graph.order()) {
    if (imp.graph.node(nid).op == "dropout") { EXPECT_NEAR(imp.graph.node(nid).attrs.f("p"), 0.3, 1e-7); }
  }
}

TEST(OnnxPyTorchForms, InPlaceDropoutIsOneDropoutInTrainingAndNoneInInference) {
  REQUIRE_ONNX_MODELS();
  for (const char* file : {"random_dropout.onnx", "random_dropout_cast_like.onnx"}) {
    const auto trained = op_counts(import(file, true, 4).graph);
    EXPECT_EQ(trained, (std::map<std::string, int>{{"dropout", 1}, {"linear", 2}})) << file;
    const auto imp = import(file, true, 4);
    for (int nid : imp.graph.order()) {
      if (imp.graph.node(nid).op == "dropout") { EXPECT_NEAR(imp.graph.node(nid).attrs.f("p"), 0.2, 1e-6) << file; }
    }
    EXPECT_EQ(op_counts(import(file, false, 4).graph), (std::map<std::string, int>{{"linear", 2}})) << file;
  }
}

TEST(OnnxPyTorchForms, AFoldedBatchNormIsSaidWhenTraining) {
  REQUIRE_ONNX_MODELS();
  for (const char* file : {"folded_bn_dynamo.onnx", "folded_bn_torchscript.onnx"}) {
    const auto trained = import(file, true);
    ASSERT_EQ(trained.notices.size(), 1u) << file;
    const std::string& notice = trained.notices[0];
    for (const char* words : {"folded the batch norms of 1 layer", "without batch norm", "Model.from_torch",
                              "optimize=False"})
      EXPECT_NE(notice.find(words), std::string::npos) << file << ": " << notice;
    EXPECT_NE(notice.find(file), std::string::npos) << notice;
    EXPECT_TRUE(import(file, false).notices.empty()) << file << ": inference has nothing to lose";
  }
  // A file whose batch norms are there says nothing.
  EXPECT_TRUE(import("dynamo_unoptimized_training.onnx", true).notices.empty());
}

}  // namespace
}  // namespace trident
