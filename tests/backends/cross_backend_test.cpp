// Cross-backend agreement: every op (and shape/attribute variants of it) is built as a
// one-node ir::Graph, run through the "cpu" (oneDNN) kernel and the "cpu_ref" kernel on the
// same random f32 inputs, and every output is compared with the one tolerance table
// (support/tolerance.h). Every fused op also runs on "cpu" against its decomposition on
// "cpu_ref". Also: cpu covers every cpu_ref op, rejects f64 by name, and shares primitives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/onednn_context.h"
#include "backends/kernel.h"
#include "core/error.h"
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "support/graph_runner.h"
#include "support/tolerance.h"

namespace trident {
namespace {

using ir::Attrs;

// ---- host buffers for one node's inputs and outputs ----

// Storage of one tensor: f32 data, or i32 (labels) kept in its own vector.
struct Buffer {
  Shape shape;
  DType dtype = DType::f32;
  std::vector<float> f;
  std::vector<int32_t> i;

  TensorView view() {
    void* p = dtype == DType::i32 ? static_cast<void*>(i.data()) : static_cast<void*>(f.data());
    return TensorView{p, shape, dtype};
  }
  double at(size_t k) const { return dtype == DType::i32 ? i[k] : f[k]; }
  size_t size() const { return dtype == DType::i32 ? i.size() : f.size(); }
};

// How inputs are drawn: small integers (exact sums in f32: conv, linear, max-pool ties) or
// uniform reals.
enum class Fill { SmallInts, Uniform };

// Per-case adjustment of the default random inputs (positive variances, labels, lr...).
using InputHook = std::function<void(size_t input, Buffer& b, std::mt19937& rng)>;

std::vector<Buffer> random_inputs(const ir::Graph& g, const ir::Node& node, Fill fill,
                                  uint32_t seed, const InputHook& hook) {
  std::mt19937 rng(seed);
  std::vector<Buffer> in;
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const ir::Value& v = g.value(node.inputs[k]);
    Buffer b{v.shape, v.dtype, {}, {}};
    const size_t n = static_cast<size_t>(numel(v.shape));
    if (v.dtype == DType::i32) {
      b.i.assign(n, 0);
    } else {
      EXPECT_EQ(v.dtype, DType::f32) << "cross-backend inputs are f32";
      b.f.resize(n);
      std::uniform_int_distribution<int> ints(-3, 3);
      std::uniform_real_distribution<float> reals(-1.f, 1.f);
      for (float& x : b.f) x = fill == Fill::SmallInts ? static_cast<float>(ints(rng)) : reals(rng);
    }
    if (hook) hook(k, b, rng);
    in.push_back(std::move(b));
  }
  return in;
}

// Whether outputs that the op declares as aliases of inputs share their storage in the run.
enum class Aliasing { AsDeclared, None };

// Runs the node's kernel of `backend` on copies of `inputs`; returns the outputs.
std::vector<Buffer> run_backend(const std::string& backend, const ir::Graph& g,
                                const ir::Node& node, std::vector<Buffer> inputs,
                                Aliasing aliasing) {
  std::vector<Buffer> outs;
  for (int id : node.outputs) {
    const ir::Value& v = g.value(id);
    Buffer b{v.shape, v.dtype, {}, {}};
    // NaN marks every element a kernel forgot to write.
    b.f.assign(static_cast<size_t>(numel(v.shape)), std::numeric_limits<float>::quiet_NaN());
    outs.push_back(std::move(b));
  }
  std::vector<int> alias_of(node.outputs.size(), -1);
  const ir::OpDef& def = ir::OpRegistry::get(node.op);
  if (aliasing == Aliasing::AsDeclared && def.aliases)
    for (auto [o, i] : def.aliases(node)) alias_of[static_cast<size_t>(o)] = i;

  KernelArgs args{node, {}, {}};
  for (Buffer& b : inputs) args.in.push_back(b.view());
  for (size_t o = 0; o < outs.size(); ++o)
    args.out.push_back(alias_of[o] >= 0 ? inputs[static_cast<size_t>(alias_of[o])].view()
                                        : outs[o].view());
  std::unique_ptr<Kernel> kernel = KernelRegistry::make(backend, node, g);
  kernel->run(args);
  for (size_t o = 0; o < outs.size(); ++o)
    if (alias_of[o] >= 0) outs[o] = inputs[static_cast<size_t>(alias_of[o])];
  return outs;
}

// How far results may be from cpu_ref's: per element (|a - b| <= atol + rtol * |b|), or
// relative to the output's largest magnitude, for algorithms whose rounding error is bounded
// by the operands' norms rather than by each result (Winograd: |a - b| <= atol + rtol * max|b|).
enum class Scale { PerElement, Output };

void expect_close(const std::string& what, const Buffer& got, const Buffer& want,
                  Scale scale = Scale::PerElement) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const test_support::Tolerance tol = test_support::tolerance(want.dtype);  // i32: exact
  double largest = 0;
  for (size_t k = 0; k < want.size(); ++k) largest = std::max(largest, std::abs(want.at(k)));
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    const double a = got.at(k), b = want.at(k);
    const double err = std::abs(a - b),
                 allowed = tol.atol + tol.rtol * (scale == Scale::Output ? largest : std::abs(b));
    if (!(err <= allowed)) {  // NaN fails too
      if (bad++ == 0) first = k;
      if (!(err <= worst)) worst = err;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << want.size()
                     << " elements out of tolerance, first at " << first << " (cpu "
                     << got.at(first) << ", cpu_ref " << want.at(first) << "), worst error "
                     << worst;
}

// Runs node `node_id` of `g` on both backends with two different input draws (the second run
// of the cpu kernel rebinds every data handle) and compares every output.
// `ctx`: the context to build the cpu kernel with (compile options), else a default one.
void compare_node(const ir::Graph& g, int node_id, Fill fill, const InputHook& hook = {},
                  Aliasing aliasing = Aliasing::AsDeclared, BackendContext* ctx = nullptr,
                  Scale scale = Scale::PerElement) {
  const ir::Node& node = g.node(node_id);
  std::unique_ptr<Kernel> cpu =
      ctx ? KernelRegistry::make("cpu", node, g, *ctx) : KernelRegistry::make("cpu", node, g);
  for (uint32_t seed : {11u, 12u}) {
    std::vector<Buffer> in = random_inputs(g, node, fill, seed + 31u * node_id, hook);
    std::vector<Buffer> ref = run_backend("cpu_ref", g, node, in, aliasing);

    // The same kernel object for both draws: only the data pointers change between runs.
    std::vector<Buffer> cin = in;
    std::vector<Buffer> outs;
    for (int id : node.outputs) {
      const ir::Value& v = g.value(id);
      outs.push_back(Buffer{v.shape, v.dtype,
                            std::vector<float>(static_cast<size_t>(numel(v.shape)),
                                               std::numeric_limits<float>::quiet_NaN()),
                            {}});
    }
    std::vector<int> alias_of(node.outputs.size(), -1);
    const ir::OpDef& def = ir::OpRegistry::get(node.op);
    if (aliasing == Aliasing::AsDeclared && def.aliases)
      for (auto [o, i] : def.aliases(node)) alias_of[static_cast<size_t>(o)] = i;
    KernelArgs args{node, {}, {}};
    for (Buffer& b : cin) args.in.push_back(b.view());
    for (size_t o = 0; o < outs.size(); ++o)
      args.out.push_back(alias_of[o] >= 0 ? cin[static_cast<size_t>(alias_of[o])].view()
                                          : outs[o].view());
    cpu->run(args);
    for (size_t o = 0; o < outs.size(); ++o) {
      const Buffer& got = alias_of[o] >= 0 ? cin[static_cast<size_t>(alias_of[o])] : outs[o];
      expect_close(node.op + " '" + node.name + "' output " + std::to_string(o) + " (draw " +
                       std::to_string(seed) + ")",
                   got, ref[o], scale);
    }
  }
}

int producer(const ir::Graph& g, int value) { return g.value(value).producer; }
std::vector<int64_t> v2(int64_t a, int64_t b) { return {a, b}; }

// The output shape of conv2d(x, w) with `geom`, inferred without adding a node.
Shape conv_output_shape(const ir::Graph& g, int x, int w, const Attrs& geom) {
  ir::Node probe;
  probe.op = "conv2d";
  probe.inputs = {x, w};
  probe.attrs = geom;
  return ir::OpRegistry::get("conv2d").infer(probe, g).at(0).shape;
}

// Adjusts the randomized values of a GraphRunner before a run (the same way for both runners).
using RunnerHook = std::function<void(test_support::GraphRunner&)>;

// The graph `g` holds one fused node, producing `outs`. Runs it on "cpu" and its decomposition
// (OpDef::decompose, in a copy of g) on "cpu_ref", from the same random inputs, and compares
// every output: results, saved and running statistics, gradients.
void compare_with_decomposition(const ir::Graph& g, const std::vector<int>& outs,
                                const RunnerHook& hook = {}) {
  const ir::Node node = g.node(producer(g, outs.at(0)));
  const ir::OpDef& def = ir::OpRegistry::get(node.op);
  ir::Graph d = g;
  d.set_order({});
  const std::vector<int> dec = def.decompose(d, node);
  ASSERT_EQ(dec.size(), outs.size()) << node.op;
  test_support::GraphRunner fused(g, "cpu"), ref(d, "cpu_ref");
  for (test_support::GraphRunner* r : {&fused, &ref}) {
    r->randomize(7);
    if (hook) hook(*r);
  }
  fused.run();
  ref.run();
  for (size_t i = 0; i < outs.size(); ++i)
    test_support::expect_close(fused.values(outs[i]), ref.values(dec[i]), DType::f32,
                               node.op + " '" + node.name + "' on cpu vs its decomposition, " +
                                   def.output_name(i));
}

// Rewrites every element of value `v` in a runner (e.g. a relu output must be non-negative).
void map_value(test_support::GraphRunner& r, int v, float (*f)(float)) {
  TensorView t = r.view(v);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = f(t.as<float>()[i]);
}
float non_negative(float v) { return std::max(v, 0.f); }
float positive(float v) { return std::abs(v) + 0.5f; }

// ---- convolution ----

struct ConvCase {
  const char* name;
  Shape x, w;
  std::vector<int64_t> stride, pad, dil;
  int64_t groups;
  bool bias;
};

std::ostream& operator<<(std::ostream& os, const ConvCase& c) { return os << c.name; }

class CrossConv : public ::testing::TestWithParam<ConvCase> {};

// One graph holding the forward conv and both gradient ops (dy is a separate input).
TEST_P(CrossConv, ForwardDataAndWeightGradientsAgree) {
  const ConvCase& c = GetParam();
  ir::Graph g;
  const Attrs geom{{"stride", c.stride}, {"padding", c.pad}, {"dilation", c.dil},
                   {"groups", c.groups}};
  int x = g.add_input("x", c.x);
  int w = g.add_parameter("w", c.w, {});
  std::vector<int> in{x, w};
  if (c.bias) in.push_back(g.add_parameter("b", {c.w[0]}, {}));
  int y = g.add_node1("conv2d", in, geom, "conv");
  int dy = g.add_input("dy", g.value(y).shape);

  Attrs data_attrs = geom;
  data_attrs.set("input_shape", c.x);
  int dx = g.add_node1("conv2d_backward_data", {dy, w}, data_attrs, "conv.dgrad");
  Attrs w_attrs = geom;
  w_attrs.set("weight_shape", c.w);
  w_attrs.set("has_bias", int64_t{c.bias});
  auto dw = g.add_node("conv2d_backward_weight", {x, dy}, w_attrs, "conv.wgrad");

  compare_node(g, producer(g, y), Fill::SmallInts);
  compare_node(g, producer(g, dx), Fill::SmallInts);
  compare_node(g, producer(g, dw[0]), Fill::SmallInts);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CrossConv,
    ::testing::Values(
        ConvCase{"Pad1Bias", {2, 7, 7, 4}, {8, 3, 3, 4}, v2(1, 1), v2(1, 1), v2(1, 1), 1, true},
        ConvCase{"Stride2OddNoBias", {2, 9, 11, 3}, {5, 3, 3, 3}, v2(2, 2), v2(1, 1), v2(1, 1), 1,
                 false},
        ConvCase{"Dilation2", {1, 10, 9, 4}, {6, 3, 3, 4}, v2(1, 1), v2(2, 2), v2(2, 2), 1, true},
        ConvCase{"Groups2", {2, 8, 8, 6}, {4, 3, 3, 3}, v2(1, 1), v2(1, 1), v2(1, 1), 2, true},
        ConvCase{"Depthwise", {2, 6, 6, 8}, {8, 3, 3, 1}, v2(1, 1), v2(1, 1), v2(1, 1), 8, false},
        ConvCase{"Pointwise1x1Stride2", {3, 8, 8, 16}, {32, 1, 1, 16}, v2(2, 2), v2(0, 0),
                 v2(1, 1), 1, false},
        ConvCase{"MixedHW", {2, 9, 11, 4}, {6, 3, 3, 2}, v2(2, 1), v2(1, 0), v2(1, 2), 2, true},
        ConvCase{"Stem7x7Stride2", {2, 17, 17, 3}, {8, 7, 7, 3}, v2(2, 2), v2(3, 3), v2(1, 1), 1,
                 false},
        ConvCase{"Wide3x3", {4, 14, 14, 32}, {64, 3, 3, 32}, v2(1, 1), v2(1, 1), v2(1, 1), 1,
                 true}),
    [](const ::testing::TestParamInfo<ConvCase>& info) { return std::string(info.param.name); });

// ---- batch normalization ----

struct BnCase {
  const char* name;
  Shape x;
  double eps, momentum;
};

std::ostream& operator<<(std::ostream& os, const BnCase& c) { return os << c.name; }

class CrossBatchnorm : public ::testing::TestWithParam<BnCase> {};

// gamma, the running variance and saved_invstd must be positive; the rest is uniform.
void bn_hook(const std::string& op, size_t k, Buffer& b, std::mt19937& rng) {
  std::uniform_real_distribution<float> pos(0.5f, 2.f);
  const bool positive = (op == "batchnorm2d" && (k == 1 || k == 4)) ||
                        (op == "batchnorm2d_backward" && (k == 2 || k == 4));
  if (positive)
    for (float& v : b.f) v = pos(rng);
}

TEST_P(CrossBatchnorm, TrainingInferenceAndBackwardAgree) {
  const BnCase& c = GetParam();
  ir::Graph g;
  const Shape ch{c.x[3]};
  int x = g.add_input("x", c.x);
  std::vector<int> in{x};
  for (const char* n : {"gamma", "beta", "running_mean", "running_var"})
    in.push_back(g.add_parameter(n, ch, {}));
  auto train = g.add_node("batchnorm2d", in,
                          {{"eps", c.eps}, {"momentum", c.momentum}, {"training", int64_t{1}}},
                          "bn.train");
  int infer = g.add_node1("batchnorm2d", in,
                          {{"eps", c.eps}, {"momentum", c.momentum}, {"training", int64_t{0}}},
                          "bn.infer");
  int dy = g.add_input("dy", c.x);
  int mean = g.add_input("saved_mean", ch), invstd = g.add_input("saved_invstd", ch);
  auto back = g.add_node("batchnorm2d_backward", {x, dy, in[1], mean, invstd}, {{"eps", c.eps}},
                         "bn.backward");

  for (int v : {train[0], infer, back[0]}) {
    const std::string op = g.node(producer(g, v)).op;
    compare_node(g, producer(g, v), Fill::Uniform,
                 [op](size_t k, Buffer& b, std::mt19937& rng) { bn_hook(op, k, b, rng); });
  }
  // Running statistics written to separate outputs too (not aliased onto the inputs).
  compare_node(g, producer(g, train[0]), Fill::Uniform,
               [](size_t k, Buffer& b, std::mt19937& rng) { bn_hook("batchnorm2d", k, b, rng); },
               Aliasing::None);
}

INSTANTIATE_TEST_SUITE_P(Variants, CrossBatchnorm,
                         ::testing::Values(BnCase{"Small", {4, 5, 6, 8}, 1e-5, 0.1},
                                           BnCase{"OddChannels", {2, 3, 3, 17}, 1e-3, 0.5},
                                           BnCase{"Wide", {8, 7, 7, 64}, 1e-5, 0.1},
                                           BnCase{"TwoValuesPerChannel", {2, 1, 1, 3}, 1e-5, 1.0}),
                         [](const ::testing::TestParamInfo<BnCase>& info) {
                           return std::string(info.param.name);
                         });

// ---- pooling ----

struct PoolCase {
  const char* name;
  Shape x;
  std::vector<int64_t> kernel, stride, pad;
};

std::ostream& operator<<(std::ostream& os, const PoolCase& c) { return os << c.name; }

class CrossPool : public ::testing::TestWithParam<PoolCase> {};

// Max pooling on small integers (many ties: the first maximum must win on both backends),
// average pooling in both padding modes, each with its backward op.
TEST_P(CrossPool, MaxAndAveragePoolingAgree) {
  const PoolCase& c = GetParam();
  ir::Graph g;
  int x = g.add_input("x", c.x);
  const Attrs geom{{"kernel", c.kernel}, {"stride", c.stride}, {"padding", c.pad}};
  int ym = g.add_node1("maxpool2d", {x}, geom, "maxpool");
  int dy = g.add_input("dy", g.value(ym).shape);
  int dxm = g.add_node1("maxpool2d_backward", {x, dy}, geom, "maxpool.backward");
  compare_node(g, producer(g, ym), Fill::SmallInts);
  compare_node(g, producer(g, dxm), Fill::SmallInts);

  for (int64_t include : {1, 0}) {
    Attrs a = geom;
    a.set("count_include_pad", include);
    const std::string tag = include ? "include_pad" : "exclude_pad";
    int ya = g.add_node1("avgpool2d", {x}, a, "avgpool." + tag);
    a.set("input_shape", c.x);
    int dxa = g.add_node1("avgpool2d_backward", {dy}, a, "avgpool.backward." + tag);
    compare_node(g, producer(g, ya), Fill::Uniform);
    compare_node(g, producer(g, dxa), Fill::Uniform);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CrossPool,
    ::testing::Values(PoolCase{"K3S2P1", {2, 9, 9, 5}, v2(3, 3), v2(2, 2), v2(1, 1)},
                      PoolCase{"K2S2", {2, 8, 8, 3}, v2(2, 2), v2(2, 2), v2(0, 0)},
                      PoolCase{"K3S1P1", {1, 7, 6, 4}, v2(3, 3), v2(1, 1), v2(1, 1)},
                      PoolCase{"K2S2OddFloor", {2, 7, 7, 4}, v2(2, 2), v2(2, 2), v2(0, 0)},
                      PoolCase{"K3S2P1Even", {3, 8, 10, 16}, v2(3, 3), v2(2, 2), v2(1, 1)},
                      PoolCase{"K2x3Mixed", {2, 9, 8, 6}, v2(2, 3), v2(1, 2), v2(1, 1)}),
    [](const ::testing::TestParamInfo<PoolCase>& info) { return std::string(info.param.name); });

TEST(CrossGlobalAvgpool, ForwardAndBackwardAgree) {
  for (const Shape& xs : {Shape{2, 7, 7, 8}, Shape{3, 1, 1, 5}, Shape{1, 4, 6, 33}}) {
    ir::Graph g;
    int x = g.add_input("x", xs);
    int y = g.add_node1("global_avgpool", {x}, {}, "gap");
    int dy = g.add_input("dy", g.value(y).shape);
    int dx = g.add_node1("global_avgpool_backward", {dy}, {{"input_shape", xs}}, "gap.backward");
    compare_node(g, producer(g, y), Fill::Uniform);
    compare_node(g, producer(g, dx), Fill::Uniform);
  }
}

// ---- element-wise ----

TEST(CrossEltwise, ReluReluBackwardAndAddAgree) {
  for (const Shape& s : {Shape{2, 5, 5, 3}, Shape{7, 13}, Shape{1}}) {
    ir::Graph g;
    int x = g.add_input("x", s);
    int z = g.add_input("z", s);
    int y = g.add_node1("relu", {x}, {}, "relu");
    int dy = g.add_input("dy", s);
    int dx = g.add_node1("relu_backward", {y, dy}, {}, "relu.backward");
    int sum = g.add_node1("add", {x, z}, {}, "add");
    compare_node(g, producer(g, y), Fill::Uniform);
    // relu_backward reads relu's output: non-negative, about half exact zeros.
    compare_node(g, producer(g, dx), Fill::Uniform, [](size_t k, Buffer& b, std::mt19937&) {
      if (k == 0)
        for (float& v : b.f) v = std::max(v, 0.f);
    });
    compare_node(g, producer(g, sum), Fill::Uniform);
  }
}

// ---- linear ----

struct LinearCase {
  const char* name;
  int64_t N, I, O;
  bool bias;
};

std::ostream& operator<<(std::ostream& os, const LinearCase& c) { return os << c.name; }

class CrossLinear : public ::testing::TestWithParam<LinearCase> {};

TEST_P(CrossLinear, ForwardDataAndWeightGradientsAgree) {
  const LinearCase& c = GetParam();
  ir::Graph g;
  int x = g.add_input("x", {c.N, c.I});
  int w = g.add_parameter("w", {c.O, c.I}, {});
  std::vector<int> in{x, w};
  if (c.bias) in.push_back(g.add_parameter("b", {c.O}, {}));
  int y = g.add_node1("linear", in, {}, "fc");
  int dy = g.add_input("dy", {c.N, c.O});
  int dx = g.add_node1("linear_backward_data", {dy, w}, {}, "fc.dgrad");
  auto dw = g.add_node("linear_backward_weight", {x, dy}, {{"has_bias", int64_t{c.bias}}},
                       "fc.wgrad");
  compare_node(g, producer(g, y), Fill::SmallInts);
  compare_node(g, producer(g, dx), Fill::SmallInts);
  compare_node(g, producer(g, dw[0]), Fill::SmallInts);
}

INSTANTIATE_TEST_SUITE_P(Variants, CrossLinear,
                         ::testing::Values(LinearCase{"Bias", 8, 20, 10, true},
                                           LinearCase{"NoBias", 8, 20, 10, false},
                                           LinearCase{"OddSizes", 5, 33, 7, true},
                                           LinearCase{"SingleSample", 1, 64, 3, false}),
                         [](const ::testing::TestParamInfo<LinearCase>& info) {
                           return std::string(info.param.name);
                         });

// ---- loss, optimizer, fill, views ----

TEST(CrossLoss, SoftmaxCrossEntropyAndBackwardAgree) {
  for (const Shape& s : {Shape{6, 10}, Shape{1, 3}, Shape{9, 17}}) {
    ir::Graph g;
    int logits = g.add_input("logits", s);
    int labels = g.add_input("labels", {s[0]}, DType::i32);
    int loss = g.add_node1("softmax_cross_entropy", {logits, labels}, {}, "loss");
    int dloss = g.add_input("dloss", {1});
    int dz = g.add_node1("softmax_cross_entropy_backward", {logits, labels, dloss}, {},
                         "loss.backward");
    const int64_t K = s[1];
    auto hook = [K](size_t k, Buffer& b, std::mt19937& rng) {
      if (k == 0)
        for (float& v : b.f) v *= 4.f;
      if (k == 1) {
        std::uniform_int_distribution<int32_t> cls(0, static_cast<int32_t>(K - 1));
        for (int32_t& v : b.i) v = cls(rng);
      }
    };
    compare_node(g, producer(g, loss), Fill::Uniform, hook);
    compare_node(g, producer(g, dz), Fill::Uniform, hook);
  }
}

TEST(CrossOptimizer, SgdUpdateAgreesInPlaceAndOutOfPlace) {
  for (int64_t nesterov : {0, 1}) {
    ir::Graph g;
    std::vector<int> in{g.add_input("lr", {1})};
    const Shape shapes[] = {{3, 4}, {5}, {2, 3, 3, 2}};
    for (const char* role : {"p", "g", "m"})
      for (size_t t = 0; t < 3; ++t)
        in.push_back(g.add_input(std::string(role) + std::to_string(t), shapes[t]));
    auto outs = g.add_node("sgd_update", in,
                           {{"count", int64_t{3}}, {"momentum", 0.9}, {"weight_decay", 1e-2},
                            {"nesterov", nesterov}},
                           "sgd");
    auto lr = [](size_t k, Buffer& b, std::mt19937&) {
      if (k == 0) b.f[0] = 0.1f;
    };
    compare_node(g, producer(g, outs[0]), Fill::Uniform, lr);
    compare_node(g, producer(g, outs[0]), Fill::Uniform, lr, Aliasing::None);
  }
}

TEST(CrossMisc, FillFlattenAndReshapeAgree) {
  ir::Graph g;
  int y = g.add_node1("fill", {}, {{"shape", std::vector<int64_t>{3, 4}}, {"value", 2.5}}, "seed");
  compare_node(g, producer(g, y), Fill::Uniform);
  int x = g.add_input("x", {2, 3, 4, 5});
  int f = g.add_node1("flatten", {x}, {}, "flatten");
  int r = g.add_node1("reshape", {x}, {{"shape", std::vector<int64_t>{6, 20}}}, "reshape");
  for (int v : {f, r}) {
    compare_node(g, producer(g, v), Fill::Uniform);                    // aliased: no-op
    compare_node(g, producer(g, v), Fill::Uniform, {}, Aliasing::None);  // separate: a copy
  }
}

// ---- fused conv → batchnorm → [add] → relu and its backward ----

struct FusedCase {
  const char* name;
  const char* op;  // cbr or cbar
  Shape x, w;
  std::vector<int64_t> stride, pad;
  bool bias;
};

std::ostream& operator<<(std::ostream& os, const FusedCase& c) { return os << c.name; }

class CrossFused : public ::testing::TestWithParam<FusedCase> {};

// Adds the case's cbr/cbar node (inputs x, w, gamma, beta, running stats, [residual], [b]).
std::vector<int> add_fused(ir::Graph& g, const FusedCase& c) {
  int x = g.add_input("x", c.x);
  int w = g.add_parameter("w", c.w, {});
  std::vector<int> in{x, w};
  const Shape ch{c.w[0]};
  for (const char* n : {"gamma", "beta", "running_mean", "running_var"})
    in.push_back(g.add_parameter(n, ch, {}));
  const Attrs a{{"stride", c.stride}, {"padding", c.pad}, {"eps", 1e-5}, {"momentum", 0.1}};
  const Shape y_shape = conv_output_shape(g, x, w, {{"stride", c.stride}, {"padding", c.pad}});
  if (std::string(c.op) == "cbar") in.push_back(g.add_input("residual", y_shape));
  if (c.bias) in.push_back(g.add_parameter("b", ch, {}));
  return g.add_node(c.op, in, a, "block");
}

// Adds batchnorm_relu_backward for the case's shapes, its inputs fresh values.
std::vector<int> add_bn_relu_backward(ir::Graph& g, const FusedCase& c) {
  ir::Graph scratch;
  const Attrs geom{{"stride", c.stride}, {"padding", c.pad}};
  const Shape y_shape = conv_output_shape(scratch, scratch.add_input("x", c.x),
                                          scratch.add_input("w", c.w), geom);
  const Shape ch{c.w[0]};
  int y = g.add_input("y", y_shape), dy = g.add_input("dy", y_shape);
  int conv_out = g.add_input("conv_out", y_shape);
  int gamma = g.add_parameter("gamma.bwd", ch, {});
  int mean = g.add_input("saved_mean", ch), invstd = g.add_input("saved_invstd", ch);
  return g.add_node("batchnorm_relu_backward", {y, dy, conv_out, gamma, mean, invstd},
                    {{"eps", 1e-5}, {"residual", int64_t{std::string(c.op) == "cbar"}}},
                    "block.bn_relu_backward");
}

TEST_P(CrossFused, ForwardAndBatchnormReluBackwardAgree) {
  const FusedCase& c = GetParam();
  ir::Graph g;
  auto outs = add_fused(g, c);
  // Conv on small integers (exact); gamma and the running variance positive.
  compare_node(g, producer(g, outs[0]), Fill::SmallInts, [](size_t k, Buffer& b, std::mt19937& rng) {
    std::uniform_real_distribution<float> pos(0.5f, 2.f);
    if (k == 2 || k == 5)
      for (float& v : b.f) v = pos(rng);
  });

  ir::Graph gb;
  auto back = add_bn_relu_backward(gb, c);
  compare_node(gb, producer(gb, back[0]), Fill::Uniform, [](size_t k, Buffer& b, std::mt19937& rng) {
    std::uniform_real_distribution<float> pos(0.5f, 2.f);
    if (k == 0)
      for (float& v : b.f) v = std::max(v, 0.f);  // a relu output: about half zeros
    if (k == 3 || k == 5)
      for (float& v : b.f) v = pos(rng);
  });
}

// Forward on random reals: conv, batch statistics, running statistics, y.
TEST_P(CrossFused, FusedOnCpuMatchesDecompositionOnCpuRef) {
  ir::Graph g;
  compare_with_decomposition(g, add_fused(g, GetParam()));
}

TEST_P(CrossFused, BatchnormReluBackwardOnCpuMatchesDecompositionOnCpuRef) {
  ir::Graph g;
  const std::vector<int> outs = add_bn_relu_backward(g, GetParam());
  const ir::Node& n = g.node(producer(g, outs[0]));
  compare_with_decomposition(g, outs, [&n](test_support::GraphRunner& r) {
    map_value(r, n.inputs[0], non_negative);  // y is a relu output: about half zeros
    map_value(r, n.inputs[5], positive);      // saved_invstd
  });
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CrossFused,
    ::testing::Values(
        FusedCase{"Cbr", "cbr", {2, 8, 8, 4}, {8, 3, 3, 4}, v2(1, 1), v2(1, 1), false},
        FusedCase{"CbrBiasStride2", "cbr", {2, 9, 9, 3}, {6, 3, 3, 3}, v2(2, 2), v2(1, 1), true},
        FusedCase{"Cbar", "cbar", {2, 8, 8, 8}, {8, 3, 3, 8}, v2(1, 1), v2(1, 1), false},
        FusedCase{"CbarBias1x1", "cbar", {3, 6, 6, 16}, {16, 1, 1, 16}, v2(1, 1), v2(0, 0),
                  true}),
    [](const ::testing::TestParamInfo<FusedCase>& info) { return std::string(info.param.name); });

// ---- inference fusions: conv2d_epilogue and fold_batchnorm ----

struct EpilogueCase {
  const char* name;
  Shape x, w;
  std::vector<int64_t> stride, pad;
  int64_t groups;
  bool bias, residual, relu;
};

std::ostream& operator<<(std::ostream& os, const EpilogueCase& c) { return os << c.name; }

class CrossEpilogue : public ::testing::TestWithParam<EpilogueCase> {};

// Adds the case's conv2d_epilogue node (inputs x, w, [b], [residual]); returns y.
int add_epilogue(ir::Graph& g, const EpilogueCase& c) {
  int x = g.add_input("x", c.x);
  int w = g.add_parameter("w", c.w, {});
  std::vector<int> in{x, w};
  Attrs a{{"stride", c.stride}, {"padding", c.pad}, {"groups", c.groups}};
  const Shape y_shape = conv_output_shape(g, x, w, a);
  if (c.bias) in.push_back(g.add_parameter("b", {c.w[0]}, {}));
  if (c.residual) in.push_back(g.add_input("residual", y_shape));
  a.set("has_bias", int64_t{c.bias});
  a.set("residual", int64_t{c.residual});
  a.set("relu", int64_t{c.relu});
  return g.add_node1("conv2d_epilogue", in, a, "epilogue");
}

// Small integers: the direct convolution is exact, so sum and relu post-ops must match bit for
// bit. Winograd stays off: its transforms round (and timing could pick it on a loaded machine).
TEST_P(CrossEpilogue, AgreesWithCpuRef) {
  ir::Graph g;
  std::shared_ptr<BackendContext> ctx = KernelRegistry::make_context("cpu");
  ctx->set_kernel_options({/*inference=*/true, /*autotune=*/true, /*winograd=*/0});
  compare_node(g, producer(g, add_epilogue(g, GetParam())), Fill::SmallInts, {}, Aliasing::AsDeclared, ctx.get());
}

TEST_P(CrossEpilogue, OnCpuMatchesDecompositionOnCpuRef) {
  ir::Graph g;
  compare_with_decomposition(g, {add_epilogue(g, GetParam())});
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CrossEpilogue,
    ::testing::Values(
        EpilogueCase{"BiasResidualRelu", {2, 8, 8, 8}, {8, 3, 3, 8}, v2(1, 1), v2(1, 1), 1, true,
                     true, true},
        EpilogueCase{"ResidualNoReluNoBias", {2, 8, 8, 8}, {8, 3, 3, 8}, v2(1, 1), v2(1, 1), 1,
                     false, true, false},
        EpilogueCase{"BiasRelu", {2, 7, 7, 4}, {6, 3, 3, 4}, v2(1, 1), v2(1, 1), 1, true, false,
                     true},
        EpilogueCase{"BiasOnly", {2, 7, 7, 4}, {6, 3, 3, 4}, v2(1, 1), v2(1, 1), 1, true, false,
                     false},
        EpilogueCase{"Stride2ResidualRelu", {2, 9, 9, 4}, {8, 3, 3, 4}, v2(2, 2), v2(1, 1), 1, true,
                     true, true},
        EpilogueCase{"Stride2ReluNoBias", {3, 10, 10, 3}, {8, 3, 3, 3}, v2(2, 2), v2(1, 1), 1,
                     false, false, true},
        EpilogueCase{"Groups2ResidualRelu", {2, 8, 8, 6}, {4, 3, 3, 3}, v2(1, 1), v2(1, 1), 2, true,
                     true, true},
        EpilogueCase{"Groups2Relu", {2, 8, 8, 6}, {6, 3, 3, 3}, v2(1, 1), v2(1, 1), 2, false, false,
                     true},
        EpilogueCase{"Pointwise1x1Residual", {2, 6, 6, 16}, {16, 1, 1, 16}, v2(1, 1), v2(0, 0), 1,
                     false, true, true}),
    [](const ::testing::TestParamInfo<EpilogueCase>& info) {
      return std::string(info.param.name);
    });

// ---- Winograd: inference convolutions the cpu backend may compute by Winograd's algorithm ----

struct WinogradCase {
  const char* name;
  Shape x, w;
  bool bias, residual, relu;
};

std::ostream& operator<<(std::ostream& os, const WinogradCase& c) { return os << c.name; }

class CpuWinograd : public ::testing::TestWithParam<WinogradCase> {};

int add_winograd_case(ir::Graph& g, const WinogradCase& c) {
  return add_epilogue(g, EpilogueCase{c.name, c.x, c.w, v2(1, 1), v2(1, 1), 1, c.bias,
                                      c.residual, c.relu});
}

// How the cpu backend builds the node with CompileOptions::winograd = `mode` (and autotune).
std::string implementation(const ir::Graph& g, int node_id, int mode, bool autotune = true) {
  std::shared_ptr<BackendContext> ctx = KernelRegistry::make_context("cpu");
  ctx->set_kernel_options({/*inference=*/true, autotune, mode});
  return KernelRegistry::make("cpu", g.node(node_id), g, *ctx)->implementation();
}

// Requested, Winograd computes the 3x3 stride-1 inference convolution (where oneDNN has it
// for this machine's instruction set) and agrees with cpu_ref's direct sum within the table,
// relative to the output's scale: F(4,3)'s transforms round to ~2e-5 absolute on outputs of
// magnitude ~10 whatever each output's own size (per element, near-zero outputs would fail
// the f32 atol of 1e-5 although the result is as good as Winograd gets).
TEST_P(CpuWinograd, AgreesWithCpuRef) {
  ir::Graph g;
  const int node = producer(g, add_winograd_case(g, GetParam()));
  std::shared_ptr<BackendContext> ctx = KernelRegistry::make_context("cpu");
  ctx->set_kernel_options({/*inference=*/true, /*autotune=*/true, /*winograd=*/1});
  const std::string how = KernelRegistry::make("cpu", g.node(node), g, *ctx)->implementation();
  if (how.empty()) GTEST_SKIP() << "oneDNN has no Winograd convolution for this CPU";
  EXPECT_EQ(how.rfind("winograd", 0), 0u) << how;
  std::cout << "[ winograd ] " << GetParam().name << ": " << how << "\n";
  compare_node(g, node, Fill::Uniform, {}, Aliasing::AsDeclared, ctx.get(), Scale::Output);
}

// Off, it never runs (timing chooses among the direct implementations); without autotune,
// neither (oneDNN's first direct implementation runs, untimed, as before there was a choice);
// automatic with autotune, the kernel says which implementation timing chose and every time.
TEST_P(CpuWinograd, OffAndUntimedKeepTheDirectConvolution) {
  ir::Graph g;
  const int node = producer(g, add_winograd_case(g, GetParam()));
  const std::string off = implementation(g, node, 0);
  EXPECT_EQ(off.find("winograd"), std::string::npos) << off;
  EXPECT_EQ(implementation(g, node, 0, /*autotune=*/false), "");
  EXPECT_EQ(implementation(g, node, -1, /*autotune=*/false), "");
  if (implementation(g, node, 1).empty()) GTEST_SKIP() << "oneDNN has no Winograd convolution for this CPU";
  const std::string timed = implementation(g, node, -1);
  std::cout << "[ timed ] " << GetParam().name << ": " << timed << "\n";
  EXPECT_TRUE(timed.rfind("winograd (", 0) == 0 || timed.rfind("direct (", 0) == 0) << timed;
  EXPECT_NE(timed.find("winograd ("), std::string::npos) << "Winograd was a candidate: " << timed;
  EXPECT_NE(timed.find(" ms"), std::string::npos) << timed;
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CpuWinograd,
    ::testing::Values(
        WinogradCase{"Batch1BiasRelu", {1, 14, 14, 64}, {64, 3, 3, 64}, true, false, true},
        WinogradCase{"Batch16ResidualRelu", {16, 12, 12, 32}, {64, 3, 3, 32}, true, true, true},
        WinogradCase{"Batch8OddSizeNoBias", {8, 9, 11, 64}, {32, 3, 3, 64}, false, false, true}),
    [](const ::testing::TestParamInfo<WinogradCase>& info) {
      return std::string(info.param.name);
    });

TEST(CrossFoldBatchnorm, WithAndWithoutBiasAgree) {
  for (const Shape& ws : {Shape{8, 3, 3, 4}, Shape{16, 1, 1, 16}, Shape{5, 7, 7, 3}})
    for (bool bias : {false, true}) {
      ir::Graph g;
      const Shape ch{ws[0]};
      std::vector<int> in{g.add_parameter("w", ws, {})};
      for (const char* n : {"gamma", "beta", "running_mean", "running_var"})
        in.push_back(g.add_parameter(n, ch, {}));
      if (bias) in.push_back(g.add_parameter("b", ch, {}));
      auto outs = g.add_node("fold_batchnorm", in, {{"eps", 1e-3}}, "fold");
      compare_node(g, producer(g, outs[0]), Fill::Uniform,
                   [](size_t k, Buffer& b, std::mt19937& rng) {
                     std::uniform_real_distribution<float> pos(0.5f, 2.f);
                     if (k == 4)
                       for (float& v : b.f) v = pos(rng);  // the running variance
                   });
    }
}

// ---- the fused element-wise chain ----

TEST(CrossElementwise, ProgramsAgreeAndMatchTheirDecomposition) {
  const char* programs[] = {"relu", "add:1", "add:1,relu", "relu;add:1",
                            "add:1,relu;relu,add:2;add:2,add:1,relu"};
  for (const Shape& s : {Shape{2, 5, 5, 3}, Shape{7, 13}})
    for (const char* p : programs) {
      ir::Graph g;
      std::vector<int> in;  // inputs no program step names are simply not read
      for (const char* n : {"x0", "x1", "x2"}) in.push_back(g.add_input(n, s));
      auto outs = g.add_node("elementwise", in, {{"programs", std::string(p)}}, "ew");
      SCOPED_TRACE(p);
      compare_node(g, producer(g, outs[0]), Fill::Uniform);
      compare_with_decomposition(g, outs);
    }
}

// ---- coverage, dtype errors, primitive sharing ----

// The ops of docs/OPS.md and every fused op have a kernel on both backends. (A fixed
// list: ops added to cpu_ref later get their cpu kernel, and their entry here, separately.)
TEST(CrossBackend, CpuCoversTheSpecAndFusedOps) {
  const char* ops[] = {"conv2d", "batchnorm2d", "relu", "add", "maxpool2d", "avgpool2d",
                       "global_avgpool", "flatten", "reshape", "linear", "softmax_cross_entropy",
                       "fill", "conv2d_backward_data", "conv2d_backward_weight",
                       "batchnorm2d_backward", "relu_backward", "maxpool2d_backward",
                       "avgpool2d_backward", "global_avgpool_backward", "linear_backward_data",
                       "linear_backward_weight", "softmax_cross_entropy_backward", "sgd_update",
                       "cbr", "cbar", "batchnorm_relu_backward", "conv2d_epilogue",
                       "fold_batchnorm", "elementwise"};
  for (const char* op : ops) {
    EXPECT_TRUE(KernelRegistry::has("cpu_ref", op)) << op;
    EXPECT_TRUE(KernelRegistry::has("cpu", op)) << "cpu has no kernel for " << op;
  }
}

TEST(CrossBackend, CpuRejectsF64ByNodeAndDtype) {
  ir::Graph g;
  int x = g.add_input("x", {1, 5, 5, 2}, DType::f64);
  int w = g.add_parameter("w", {3, 3, 3, 2}, {}, DType::f64);
  int y = g.add_node1("conv2d", {x, w}, {}, "f64_conv");
  try {
    KernelRegistry::make("cpu", g.node(producer(g, y)), g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("f64_conv"), std::string::npos) << m;
    EXPECT_NE(m.find("f64"), std::string::npos) << m;
    EXPECT_NE(m.find("f32"), std::string::npos) << m;
  }
}

TEST(CrossBackend, IdenticalConvLayersShareOnePrimitive) {
  ir::Graph g;
  const Attrs a{{"padding", v2(1, 1)}};
  int x = g.add_input("x", {2, 13, 13, 24});  // a shape no other test uses
  int w1 = g.add_parameter("w1", {24, 3, 3, 24}, {});
  int w2 = g.add_parameter("w2", {24, 3, 3, 24}, {});
  int y1 = g.add_node1("conv2d", {x, w1}, a, "block.conv1");
  int y2 = g.add_node1("conv2d", {y1, w2}, a, "block.conv2");

  onednn::OnednnContext& ctx = onednn::OnednnContext::instance();
  const int64_t misses0 = ctx.misses();
  auto k1 = KernelRegistry::make("cpu", g.node(producer(g, y1)), g);
  const int64_t misses1 = ctx.misses(), hits1 = ctx.hits();
  EXPECT_GT(misses1, misses0) << "the first layer builds its primitive";
  auto k2 = KernelRegistry::make("cpu", g.node(producer(g, y2)), g);
  EXPECT_EQ(ctx.misses(), misses1) << "the second, identical layer builds nothing";
  EXPECT_EQ(ctx.hits(), hits1 + (misses1 - misses0)) << "it reuses every primitive of the first";
  // Both still compute the right thing (shared primitive, own scratchpads).
  compare_node(g, producer(g, y1), Fill::SmallInts);
  compare_node(g, producer(g, y2), Fill::SmallInts);
}

}  // namespace
}  // namespace trident
