// group_weight_casts: structural (a mixed-precision ResNet converts its weights in one node and
// their gradients in one more; nothing else casts a parameter), negative (f32 training has no
// casts to group), numerical (cast_group equals its casts one by one, bit for bit).
#include <gtest/gtest.h>

#include <cstring>

#include "frontend/zoo.h"
#include "ir/op_registry.h"
#include "passes/pass.h"
#include "runtime/executable.h"
#include "support/graph_queries.h"
#include "support/graph_runner.h"

using namespace trident;
using test_support::count_op;

namespace {

// The cuda pipeline's graph (no kernels are built, so no GPU is needed).
ir::Graph compiled(DType precision, const std::vector<std::string>& disabled = {}) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = "cuda";
  opt.precision = precision;
  opt.disabled_passes = disabled;
  // The gradients' group stays a node of its own (fold_gradient_cast has its own tests).
  if (precision != DType::f32) opt.disabled_passes.push_back("fold_gradient_cast");
  return runtime::compile_graph(frontend::build_model("resnet_cifar", {.batch = 2}), opt).graph;
}

int parameter_casts(const ir::Graph& g) {
  int n = 0;
  for (int id : g.order())
    n += g.node(id).op == "cast" && g.value(g.node(id).inputs[0]).role == ir::ValueRole::Parameter;
  return n;
}

}  // namespace

TEST(GroupWeightCasts, AMixedPrecisionResNetCastsItsWeightsInOneNodeAndTheirGradientsInAnother) {
  const ir::Graph g = compiled(DType::f16);
  const ir::Graph plain = compiled(DType::f16, {"group_weight_casts"});
  const int weights = parameter_casts(plain);
  ASSERT_GT(weights, 10);
  EXPECT_EQ(parameter_casts(g), 0);
  ASSERT_EQ(count_op(g, "cast_group"), 2);
  std::vector<size_t> sizes;
  std::vector<std::string> dtypes;
  for (int id : g.order())
    if (g.node(id).op == "cast_group") {
      sizes.push_back(g.node(id).inputs.size());
      dtypes.push_back(g.node(id).attrs.s("dtype"));
    }
  EXPECT_EQ(sizes, (std::vector<size_t>{static_cast<size_t>(weights), static_cast<size_t>(weights)}));
  EXPECT_EQ(dtypes, (std::vector<std::string>{"f16", "f32"}));
  // The single casts of the gradients are gone too: 2 · weights fewer cast nodes, 2 groups more.
  EXPECT_EQ(count_op(plain, "cast") - count_op(g, "cast"), 2 * weights);
}

TEST(GroupWeightCasts, F32TrainingHasNothingToGroup) {
  const ir::Graph g = compiled(DType::f32);
  EXPECT_EQ(count_op(g, "cast_group"), 0);
}

TEST(GroupWeightCasts, AGroupEqualsItsCastsOneByOne) {
  for (auto [from, to] : {std::pair{DType::f32, DType::f16}, {DType::f32, DType::bf16}, {DType::f16, DType::f32}}) {
    ir::Graph g;
    std::vector<int> in, single;
    for (int k = 0; k < 5; ++k) {
      in.push_back(g.add_input("x" + std::to_string(k), {1 + 13 * k}, from));
      single.push_back(g.add_node1("cast", {in.back()}, {{"dtype", std::string(dtype_name(to))}}, "c" + std::to_string(k)));
    }
    const std::vector<int> grouped = g.add_node("cast_group", in, {{"dtype", std::string(dtype_name(to))}}, "group");
    ASSERT_EQ(grouped.size(), in.size());
    test_support::GraphRunner r(g, "cpu_ref");
    r.randomize(8);
    r.run();
    for (size_t k = 0; k < in.size(); ++k) {
      const TensorView a = r.view(grouped[k]), b = r.view(single[k]);
      EXPECT_EQ(a.dtype, to);
      EXPECT_EQ(std::memcmp(a.data, b.data, a.bytes()), 0) << "tensor " << k;
    }
  }
}
