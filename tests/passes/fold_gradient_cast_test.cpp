// fold_gradient_cast, the optimizer reading the f16/bf16 weight gradients of mixed-precision
// training itself: structural (a ResNet's gradients reach sgd_update and adamw_update in the
// working dtype and only the weights' own cast group is left), negative (a copy with another
// reader, a graph output, keeps its cast, with the reason; f32 training has nothing to fold),
// numerical (the reference optimizers' steps on f16/bf16 gradients equal the steps on their f32
// casts, bit for bit, with loss scaling).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "frontend/zoo.h"
#include "ops/optimizer_params.h"
#include "passes/pass.h"
#include "runtime/executable.h"
#include "support/error_of.h"
#include "support/graph_queries.h"
#include "support/graph_runner.h"
#include "support/pass_records.h"

using namespace trident;
using test_support::count_op;

namespace {

passes::CompileOptions training(DType precision, const std::string& backend, bool fold,
                                passes::OptimizerKind kind = passes::OptimizerKind::Sgd) {
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Train;
  opt.backend = backend;
  opt.precision = precision;
  opt.optimizer_kind = kind;
  if (!fold) opt.disabled_passes.push_back("fold_gradient_cast");
  return opt;
}

// The dtypes of the optimizer's gradient inputs.
std::vector<DType> gradient_dtypes(const ir::Graph& g) {
  std::vector<DType> out;
  for (int id : g.order()) {
    const ir::Node& n = g.node(id);
    if (!ops::is_optimizer_op(n.op)) continue;
    const size_t count = static_cast<size_t>(n.attrs.i("count"));
    for (size_t t = 0; t < count; ++t) out.push_back(g.value(n.inputs[1 + count + t]).dtype);
  }
  return out;
}

}  // namespace

TEST(FoldGradientCast, TheOptimizerReadsTheGradientsInTheWorkingDtype) {
  for (DType d : {DType::f16, DType::bf16})
    for (auto kind : {passes::OptimizerKind::Sgd, passes::OptimizerKind::AdamW}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " " + std::string(passes::optimizer_kind_name(kind)));
      const auto c = test_support::run_pipeline(frontend::build_model("resnet_cifar", {.batch = 2}),
                                                training(d, "cuda", true, kind), "fold_gradient_cast");
      ASSERT_EQ(count_op(c.graph, "cast_group"), 1);  // the weights' own, to the working dtype
      ASSERT_EQ(c.fusions.size(), 1u);
      EXPECT_TRUE(c.rejections.empty());
      size_t cast_weights = 0;
      for (int id : c.graph.order())
        if (c.graph.node(id).op == "cast_group") cast_weights = c.graph.node(id).inputs.size();
      // Every weight the group casts has its gradient read in the working dtype; the parameters
      // kept in f32 (the batchnorms') have f32 gradients, as before.
      const std::vector<DType> dtypes = gradient_dtypes(c.graph);
      EXPECT_EQ(static_cast<size_t>(std::count(dtypes.begin(), dtypes.end(), d)), cast_weights);
      EXPECT_EQ(static_cast<size_t>(std::count(dtypes.begin(), dtypes.end(), DType::f32)), dtypes.size() - cast_weights);
    }
}

TEST(FoldGradientCast, F32TrainingAndTheOnednnBackendHaveNoSuchPass) {
  const auto f32 = runtime::compile_graph(frontend::build_model("resnet_cifar", {.batch = 2}),
                                          training(DType::f32, "cuda", true));
  for (DType g : gradient_dtypes(f32.graph)) EXPECT_EQ(g, DType::f32);
  // Its optimizer takes f32 gradients only: the pass is not in that pipeline to turn off.
  const std::string refused = test_support::error_of([] {
    runtime::compile_graph(frontend::build_model("resnet_cifar", {.batch = 2}), training(DType::f16, "cpu", false));
  });
  EXPECT_NE(refused.find("unknown pass 'fold_gradient_cast'"), std::string::npos) << refused;
}

// Two gradients cast in one group, one of the f32 copies also a graph output: the group stays,
// and the refusal names the copy.
TEST(FoldGradientCast, ACopyWithAnotherReaderKeepsItsCast) {
  ir::Graph g;
  const int w1 = g.add_parameter("w1", {4}, {}), w2 = g.add_parameter("w2", {3}, {});
  const int d1 = g.add_input("d1", {4}, DType::f16), d2 = g.add_input("d2", {3}, DType::f16);
  const std::vector<int> wide = g.add_node("cast_group", {d1, d2}, {{"dtype", std::string("f32")}}, "grads.f32");
  const int m1 = g.add_state("w1.momentum", {4}, {ir::Init::Zeros}), m2 = g.add_state("w2.momentum", {3}, {ir::Init::Zeros});
  g.add_node("sgd_update", {g.add_input("lr", {1}), w1, w2, wide[0], wide[1], m1, m2},
             {{"count", int64_t{2}}, {"momentum", 0.9}, {"weight_decay", 0.0}, {"nesterov", int64_t{0}}}, "sgd");
  g.mark_output(wide[1]);
  passes::CompileOptions opt = training(DType::f16, "cuda", true);
  passes::PassContext ctx(opt);
  passes::fold_gradient_cast(g, ctx);
  EXPECT_EQ(count_op(g, "cast_group"), 1);
  ASSERT_EQ(ctx.rejections.size(), 1u);
  EXPECT_EQ(ctx.rejections[0].reason, "the gradient '" + g.value(wide[1]).name + "' is a graph output");
  EXPECT_TRUE(ctx.fusions.empty());
}

// The reference optimizers reading f16/bf16 gradients equal the same steps reading the
// gradients' f32 casts, bit for bit, with loss scaling (the overflow check reads them too). The
// cuda optimizers are held to these in the op cases, and whole mixed-precision training steps
// with and without the fold to the same bits in tests/gpu.
TEST(FoldGradientCast, NarrowGradientStepsEqualTheStepsOfTheirF32CastsBitForBit) {
  for (DType d : {DType::f16, DType::bf16})
    for (bool adamw : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + (adamw ? " adamw" : " sgd"));
      auto step = [&](bool widened) {
        ir::Graph g;
        const std::vector<Shape> shapes{{5}, {3, 4}};
        std::vector<int> in{g.add_input("lr", {1})};
        for (size_t i = 0; i < shapes.size(); ++i) in.push_back(g.add_parameter("p" + std::to_string(i), shapes[i], {}));
        std::vector<int> grads;
        for (size_t i = 0; i < shapes.size(); ++i) grads.push_back(g.add_input("g" + std::to_string(i), shapes[i], d));
        for (const char* s : {"m", "var"}) {  // "var": drawn positive, as a second moment is
          if (!adamw && s[0] == 'v') continue;
          for (size_t i = 0; i < shapes.size(); ++i) in.push_back(g.add_state(s + std::to_string(i), shapes[i], {}));
        }
        if (adamw) in.push_back(g.add_state("step", {1}, {}));
        in.push_back(g.add_state("loss_scale", {1}, {}));
        in.push_back(g.add_state("good_steps", {1}, {}));
        if (widened) grads = g.add_node("cast_group", grads, {{"dtype", std::string("f32")}}, "wide");
        in.insert(in.begin() + 1 + static_cast<long>(shapes.size()), grads.begin(), grads.end());
        ir::Attrs a{{"count", int64_t{2}}, {"weight_decay", 0.01}, {"loss_scaling", int64_t{1}}, {"growth_interval", int64_t{3}}};
        if (adamw) {
          a.set("beta1", 0.9);
          a.set("beta2", 0.999);
          a.set("eps", 1e-8);
        } else {
          a.set("momentum", 0.9);
          a.set("nesterov", int64_t{0});
        }
        g.add_node(adamw ? "adamw_update" : "sgd_update", in, a, "step_node");
        auto r = std::make_unique<test_support::GraphRunner>(g, "cpu_ref");
        r->randomize(7);
        r->view(g.find_value("lr")).as<float>()[0] = 0.1f;
        r->view(g.find_value("loss_scale")).as<float>()[0] = 4.f;
        if (adamw) r->view(g.find_value("step")).as<float>()[0] = 1.f;
        r->run();
        std::vector<std::vector<double>> out;
        for (const char* s : {"p0", "p1", "m0", "m1", "loss_scale", "good_steps"}) out.push_back(r->values(g.find_value(s)));
        return out;
      };
      EXPECT_EQ(step(false), step(true));
    }
}
