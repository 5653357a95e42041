// Dropout in training and inference (ops/dropout.h, passes/seed_dropout.cpp and
// remove_dropout.cpp): structural (each dropout a mask and a mul, one state, one advance after
// every mask; none of it in inference or without dropout), numerical (the mask keeps 1 − p of
// the elements at 1/(1 − p); a step's masks differ from the last step's and between dropouts,
// and repeat from the same state; the trained graph's output is the input times its mask), and the
// backends draw the same masks (the op case table compares every backend's kernel too).
#include <gtest/gtest.h>

#include <cmath>

#include "frontend/builder.h"
#include "ops/dropout.h"
#include "runtime/executable.h"
#include "support/graph_queries.h"
#include "support/graph_runner.h"

using namespace trident;
using test_support::count_op;

namespace {

// images [4, 6] → linear 16 → dropout p → relu → dropout q → linear 3.
ir::Graph head_with_dropouts(double p, double q) {
  ir::Graph model;
  frontend::Builder b(model);
  int x = b.input("images", {4, 6});
  x = b.dropout(b.linear(x, 16, true, "fc1"), p, "drop1");
  x = b.dropout(b.relu(x, "relu"), q, "drop2");
  model.mark_output(b.linear(x, 3, true, "fc2"));
  return model;
}

passes::CompileOptions options(passes::Mode mode, const std::string& backend = "cpu_ref") {
  passes::CompileOptions o;
  o.mode = mode;
  o.backend = backend;
  return o;
}

// The mask dropout_mask draws from state (key, counter) for `n` elements on cpu_ref.
std::vector<float> mask_of(uint32_t key, uint32_t counter, double p, int64_t salt, int64_t n) {
  ir::Graph g;
  const int rng = g.add_state("rng", {2}, {}, DType::i32);
  g.add_node1("dropout_mask", {rng}, {{"p", p}, {"salt", salt}, {"shape", Shape{n}}, {"dtype", std::string("f32")}}, "m");
  test_support::GraphRunner r(g, "cpu_ref");
  r.view(rng).as<uint32_t>()[0] = key;
  r.view(rng).as<uint32_t>()[1] = counter;
  r.run();
  const TensorView m = r.view(g.find_value("m"));
  return std::vector<float>(m.as<float>(), m.as<float>() + n);
}

}  // namespace

TEST(SeedDropout, EachDropoutBecomesAMaskAndAMulWithOneStateAndOneAdvance) {
  const auto c = runtime::compile_graph(head_with_dropouts(0.5, 0.25), options(passes::Mode::Train));
  const ir::Graph& g = c.graph;
  EXPECT_EQ(count_op(g, "dropout"), 0);
  EXPECT_EQ(count_op(g, "dropout_mask"), 2);
  EXPECT_EQ(count_op(g, "rng_advance"), 1);
  const int state = g.find_value(ops::kDropoutStateName);
  ASSERT_GE(state, 0);
  EXPECT_EQ(g.value(state).role, ir::ValueRole::State);
  EXPECT_EQ(g.value(state).dtype, DType::i32);
  EXPECT_EQ(g.value(state).shape, Shape{2});
  std::vector<int64_t> salts;
  std::vector<int> masks;
  size_t advance_at = 0, last_mask_at = 0;
  for (size_t k = 0; k < g.order().size(); ++k) {
    const ir::Node& n = g.node(g.order()[k]);
    if (n.op == "dropout_mask") {
      salts.push_back(n.attrs.i("salt"));
      masks.push_back(n.outputs[0]);
      last_mask_at = k;
      EXPECT_EQ(n.inputs, std::vector<int>{state}) << n.name;
    }
    if (n.op == "rng_advance") {
      advance_at = k;
      EXPECT_EQ(n.inputs[0], state);
      EXPECT_EQ(std::vector<int>(n.inputs.begin() + 1, n.inputs.end()), masks) << "the advance waits for every mask";
    }
  }
  EXPECT_GT(advance_at, last_mask_at);
  ASSERT_EQ(salts.size(), 2u);
  EXPECT_NE(salts[0], salts[1]);
  // The mask's gradient is never made: the state is no parameter (dce removes what autodiff emits).
  for (int id : g.order())
    for (int in : g.node(id).inputs) EXPECT_NE(g.value(in).name, "drop1.mask.grad") << g.node(id).name;
}

TEST(SeedDropout, NoDropoutNoStateAndInferenceRemovesIt) {
  ir::Graph plain;
  {
    frontend::Builder b(plain);
    plain.mark_output(b.linear(b.relu(b.linear(b.input("images", {4, 6}), 16, true, "fc1")), 3, true, "fc2"));
  }
  const auto train = runtime::compile_graph(plain, options(passes::Mode::Train));
  EXPECT_LT(train.graph.find_value(ops::kDropoutStateName), 0);
  EXPECT_EQ(count_op(train.graph, "rng_advance"), 0);

  const auto infer = runtime::compile_graph(head_with_dropouts(0.5, 0.25), options(passes::Mode::Infer));
  EXPECT_EQ(count_op(infer.graph, "dropout"), 0);
  EXPECT_EQ(count_op(infer.graph, "dropout_mask"), 0);
  EXPECT_LT(infer.graph.find_value(ops::kDropoutStateName), 0);
}

TEST(SeedDropout, InferenceIsTheIdentity) {
  // The same weights through the model with and without its dropouts give the same logits.
  ir::Graph plain;
  {
    frontend::Builder b(plain);
    int x = b.linear(b.input("images", {4, 6}), 16, true, "fc1");
    plain.mark_output(b.linear(b.relu(x, "relu"), 3, true, "fc2"));
  }
  auto with = runtime::Executable::compile(head_with_dropouts(0.5, 0.25), options(passes::Mode::Infer));
  auto without = runtime::Executable::compile(plain, options(passes::Mode::Infer));
  with->init_parameters(3);
  without->copy_weights_from(*with);
  for (auto* e : {with.get(), without.get()}) {
    TensorView in = e->host_view(e->value_id("images"));
    for (int64_t i = 0; i < in.numel(); ++i) in.as<float>()[i] = std::sin(0.7 * static_cast<double>(i));
    e->upload(e->value_id("images"));
    e->run();
    e->download(e->logits());
  }
  const TensorView a = with->host_view(with->logits()), b = without->host_view(without->logits());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a.as<float>()[i], b.as<float>()[i]) << i;
}

TEST(DropoutMask, KeepsOneMinusPAtOneOverOneMinusP) {
  for (double p : {0.1, 0.3, 0.5, 0.9}) {
    const int64_t n = 200000;
    const std::vector<float> m = mask_of(0x1234567u, 5, p, 0, n);
    int64_t kept = 0;
    for (float v : m) {
      if (v != 0) {
        EXPECT_FLOAT_EQ(v, static_cast<float>(1 / (1 - p)));
      }
      kept += v != 0;
    }
    // A binomial count: within 5 standard deviations of n(1 − p).
    const double sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(kept), n * (1 - p), 5 * sd) << "p " << p;
  }
  for (float v : mask_of(9, 9, 0.0, 0, 1000)) EXPECT_EQ(v, 1.0f);  // p = 0 keeps everything
}

TEST(DropoutMask, DependsOnKeyCounterAndSaltOnly) {
  const int64_t n = 4096;
  const auto base = mask_of(77, 10, 0.5, 0, n);
  EXPECT_EQ(mask_of(77, 10, 0.5, 0, n), base);  // the same state draws the same mask
  auto agreement = [&](const std::vector<float>& other) {
    int64_t same = 0;
    for (int64_t i = 0; i < n; ++i) same += (other[i] != 0) == (base[i] != 0);
    return static_cast<double>(same) / n;
  };
  // Another step, another key or another dropout: independent masks agree on about half.
  for (const auto& other : {mask_of(77, 11, 0.5, 0, n), mask_of(78, 10, 0.5, 0, n), mask_of(77, 10, 0.5, 1, n)})
    EXPECT_NEAR(agreement(other), 0.5, 0.05);
}

TEST(SeedDropout, ATrainingStepMultipliesByTheMaskAndAdvancesTheState) {
  // Without an optimizer the step's parameter gradients are outputs: the forward and backward of
  // one step, compared with the masks the state gives (dropout_mask's own function).
  passes::CompileOptions o = options(passes::Mode::Train);
  o.optimizer = false;
  auto exe = runtime::Executable::compile(head_with_dropouts(0.5, 0.25), o);
  exe->init_parameters(5);
  const int state = exe->value_id(ops::kDropoutStateName);
  TensorView s = exe->host_view(state);
  const uint32_t key = s.as<uint32_t>()[0], counter = s.as<uint32_t>()[1];
  TensorView in = exe->host_view(exe->value_id("images"));
  for (int64_t i = 0; i < in.numel(); ++i) in.as<float>()[i] = std::cos(0.3 * static_cast<double>(i));
  TensorView labels = exe->host_view(exe->value_id("labels"));
  for (int64_t i = 0; i < labels.numel(); ++i) labels.as<int32_t>()[i] = static_cast<int32_t>(i % 3);
  exe->run_until("drop1");  // the arena may reuse fc1's bytes later in the step
  // The first dropout's output is fc1's output times the mask of (key, counter, salt 0).
  const std::vector<float> m1 = mask_of(key, counter, 0.5, 0, 4 * 16);
  const TensorView fc1 = exe->host_view(exe->value_id("fc1")), y1 = exe->host_view(exe->value_id("drop1"));
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(y1.as<float>()[i], fc1.as<float>()[i] * m1[i]) << i;
  EXPECT_EQ(s.as<uint32_t>()[1], counter) << "the masks are drawn before the advance";
  exe->run();
  EXPECT_EQ(s.as<uint32_t>()[0], key);
  EXPECT_EQ(s.as<uint32_t>()[1], counter + 1) << "one step advances the counter once";
  exe->run();
  EXPECT_EQ(s.as<uint32_t>()[1], counter + 2);
}

// Stochastic depth: one draw per sample, a [N,1,1,C] mask that mul spreads over H and W, every
// value of a sample's mask the same.
TEST(SeedDropout, PerSampleDropoutDrawsOncePerSample) {
  ir::Graph model;
  {
    frontend::Builder b(model);
    int x = b.input("images", {16, 4, 4, 3});
    x = b.conv(x, 8, 3, 1, 1, {}, "conv");
    model.add_node1("dropout", {x}, {{"p", 0.5}, {"per_sample", int64_t{1}}}, "drop_path");
    model.mark_output(b.linear(b.flatten(b.global_avgpool(model.find_value("drop_path"))), 3, true, "fc"));
  }
  passes::CompileOptions o = options(passes::Mode::Train);
  o.optimizer = false;
  auto exe = runtime::Executable::compile(model, o);
  const ir::Value& mask = exe->graph().value(exe->value_id("drop_path.mask"));
  EXPECT_EQ(mask.shape, (Shape{16, 1, 1, 8}));
  exe->init_parameters(2);
  exe->run_until("drop_path.mask");
  const TensorView m = exe->host_view(exe->value_id("drop_path.mask"));
  int kept = 0;
  for (int64_t n = 0; n < 16; ++n) {
    for (int64_t c = 1; c < 8; ++c) EXPECT_EQ(m.as<float>()[n * 8 + c], m.as<float>()[n * 8]) << "sample " << n;
    kept += m.as<float>()[n * 8] != 0;
    if (m.as<float>()[n * 8] != 0) {
      EXPECT_EQ(m.as<float>()[n * 8], 2.0f);
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 16);
}

TEST(SeedDropout, TheCpuBackendDrawsTheReferenceMasks) {
  for (const std::string backend : {"cpu_ref", "cpu"}) {
    SCOPED_TRACE(backend);
    passes::CompileOptions o = options(passes::Mode::Train, backend);
    o.optimizer = false;
    auto exe = runtime::Executable::compile(head_with_dropouts(0.3, 0.6), o);
    exe->init_parameters(5);
    TensorView s = exe->host_view(exe->value_id(ops::kDropoutStateName));
    s.as<uint32_t>()[0] = 123, s.as<uint32_t>()[1] = 456;
    exe->run_until("drop2.mask");
    const TensorView m = exe->host_view(exe->value_id("drop2.mask"));
    const std::vector<float> want = mask_of(123, 456, 0.6, 1, m.numel());
    for (int64_t i = 0; i < m.numel(); ++i) EXPECT_EQ(m.as<float>()[i], want[static_cast<size_t>(i)]) << i;
  }
}
