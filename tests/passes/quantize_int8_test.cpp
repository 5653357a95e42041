// quantize_int8: the calibrate stage exposes every convolution input int8 would read (not the
// image's), the quantize stage turns each convolution with a range into an int8 conv2d_epilogue
// and refuses the rest with a sentence, a backend without int8 convolutions is an Error, and a
// network run in int8 on the cpu backend matches cpu_ref's decomposition of it and stays close
// to its f32 outputs with ranges calibrated on the same kind of images. An imported QDQ model's
// pairs become the int8 inputs of the convolutions they feed where their grid is one the kernel reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/random.h"
#include "frontend/zoo.h"
#include "ops/conv_stages.h"
#include "runtime/executable.h"
#include "runtime/int8_calibration.h"
#include "runtime/runner.h"

using namespace trident;

namespace {

passes::CompileOptions options(passes::Int8Options::Stage stage, const std::string& backend = "cpu_ref") {
  passes::CompileOptions o;
  o.mode = passes::Mode::Infer;
  o.backend = backend;
  o.int8.stage = stage;
  return runtime::with_backend_traits(o);
}

ir::Graph model() { return frontend::build_model("resnet_cifar", {2}); }

// The names of the values the calibrate stage added as outputs.
std::vector<std::string> calibrated_inputs() {
  const runtime::CompiledGraph c = runtime::compile_graph(model(), options(passes::Int8Options::Stage::calibrate));
  std::vector<std::string> names;
  for (size_t i = 1; i < c.graph.outputs().size(); ++i) names.push_back(c.graph.value(c.graph.outputs()[i]).name);
  return names;
}

TEST(QuantizeInt8, CalibrationExposesEveryConvolutionInputButTheImage) {
  const std::vector<std::string> names = calibrated_inputs();
  const runtime::CompiledGraph plain = runtime::compile_graph(model(), options(passes::Int8Options::Stage::off));
  std::set<std::string> conv_inputs;
  for (int id : plain.graph.order()) {
    const ir::Node& n = plain.graph.node(id);
    if (n.op == "conv2d" || n.op == "conv2d_epilogue") conv_inputs.insert(plain.graph.value(n.inputs[0]).name);
  }
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.size() + 1, conv_inputs.size());  // all but the image
  for (const std::string& n : names) EXPECT_TRUE(conv_inputs.count(n)) << n;
}

TEST(QuantizeInt8, EachConvolutionWithARangeRunsInInt8AndTheRestSayWhy) {
  passes::CompileOptions o = options(passes::Int8Options::Stage::quantize);
  const std::vector<std::string> names = calibrated_inputs();
  for (size_t i = 1; i < names.size(); ++i) o.int8.ranges[names[i]] = {2.0, true};  // the first has none
  const runtime::CompiledGraph c = runtime::compile_graph(model(), o);
  int64_t int8 = 0, without_range = 0;  // a block's input feeds two convolutions: count by node
  for (int id : c.graph.order()) {
    const ir::Node& n = c.graph.node(id);
    if (n.op != "conv2d" && n.op != "conv2d_epilogue") continue;
    const bool has_range = o.int8.ranges.count(c.graph.value(n.inputs[0]).name) > 0;
    EXPECT_EQ(n.attrs.has("int8_input_scale"), has_range) << n.name;
    if (!has_range) {
      without_range += c.graph.value(n.inputs[0]).name == names[0];
      continue;
    }
    ++int8;
    EXPECT_EQ(n.op, "conv2d_epilogue");
    EXPECT_FLOAT_EQ(static_cast<float>(n.attrs.f("int8_input_scale")), 2.0f / 255.0f);
    EXPECT_EQ(n.attrs.i("int8_unsigned"), 1);
  }
  EXPECT_GE(int8, static_cast<int64_t>(names.size()) - 1);
  int no_range = 0, image = 0;
  for (const passes::Rejection& r : c.rejections) {
    if (r.pass != "quantize_int8") continue;
    no_range += r.reason.find("no range for its input '" + names[0] + "'") != std::string::npos;
    image += r.reason.find("has 3 channels (the image itself)") != std::string::npos;
  }
  EXPECT_EQ(no_range, without_range);
  EXPECT_GE(no_range, 1);
  EXPECT_EQ(image, 1);
}

TEST(QuantizeInt8, ABackendWithoutInt8ConvolutionsIsAnError) {
  passes::CompileOptions o = options(passes::Int8Options::Stage::quantize);
  o.traits.int8_convolution = false;
  o.backend = "cuda";
  try {
    runtime::compile_graph(model(), o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no int8 convolution"), std::string::npos) << e.what();
  }
}

runtime::HostTensor random_images(int64_t n, uint64_t seed) {
  runtime::HostTensor t{{n, 3, 32, 32}, DType::f32, std::vector<std::byte>(static_cast<size_t>(n) * 3 * 32 * 32 * 4)};
  Rng rng(seed);
  auto* p = reinterpret_cast<float*>(t.data.data());
  for (int64_t i = 0; i < n * 3 * 32 * 32; ++i) p[i] = static_cast<float>(rng.normal());
  return t;
}

std::vector<float> logits(runtime::Runner& r, const runtime::HostTensor& x) {
  r.set_input(x);
  r.run();
  const runtime::HostTensor out = r.output(0);
  const auto* p = reinterpret_cast<const float*>(out.data.data());
  return std::vector<float>(p, p + numel(out.shape));
}

// max |a − b| / max |b|
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

TEST(QuantizeInt8, TheCpuKernelsMatchTheReferenceAndStayNearF32) {
  if (!KernelRegistry::has("cpu", "conv2d_epilogue")) GTEST_SKIP() << "this build has no oneDNN cpu backend";
  const ir::Graph g = model();
  runtime::RunnerOptions calibrate;
  calibrate.compile = options(passes::Int8Options::Stage::calibrate, "cpu");
  runtime::Runner calibration(g, calibrate);
  calibration.init_random_weights(5);
  const runtime::CalibrationResult cal =
      runtime::calibrate_int8(calibration, random_images(16, 11), runtime::Calibrator::entropy);
  EXPECT_EQ(cal.batches, 8);
  const runtime::HostTensor x = random_images(2, 12);

  std::vector<std::vector<float>> int8_out;
  for (const std::string backend : {"cpu", "cpu_ref"}) {
    runtime::RunnerOptions o;
    o.compile = options(passes::Int8Options::Stage::quantize, backend);
    o.compile.int8.ranges = cal.ranges;
    runtime::Runner r(g, o);
    r.init_random_weights(5);
    r.executable().prepare();
    int8_out.push_back(logits(r, x));
  }
  runtime::RunnerOptions f32;
  f32.compile = options(passes::Int8Options::Stage::off, "cpu");
  runtime::Runner reference(g, f32);
  reference.init_random_weights(5);
  const std::vector<float> exact = logits(reference, x);
  EXPECT_LT(relative_error(int8_out[0], int8_out[1]), 1e-2) << "int8 on cpu against cpu_ref's decomposition";
  EXPECT_LT(relative_error(int8_out[0], exact), 0.1) << "int8 against f32";
}

}  // namespace

namespace {

// x → quantize_dequantize(scale 0.05, is_unsigned, zero_point) → conv 3×3 (8 → 8 channels), and,
// with `second_reader`, the pair's output also added to the convolution's: an imported QDQ
// model's form.
ir::Graph qdq_conv(bool is_unsigned, int64_t zero_point, bool second_reader = false) {
  ir::Graph g;
  const int x = g.add_input("x", {2, 6, 6, 8});
  const int q = g.add_node1("quantize_dequantize", {x},
                            {{"scale", 0.05}, {"unsigned", int64_t{is_unsigned}}, {"zero_point", zero_point}}, "pair");
  const int w = g.add_parameter("w", {8, 3, 3, 8}, {});
  const int y = g.add_node1("conv2d", {q, w}, {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1}}}, "conv");
  g.mark_output(second_reader ? g.add_node1("add", {y, q}, {}, "sum") : y);
  return g;
}

struct Compiled {
  std::optional<ir::Node> conv;  // the convolution as compiled
  int pairs = 0;
  std::string refusal;
};

Compiled compile_qdq(const ir::Graph& model, std::vector<std::string> disabled = {}) {
  passes::CompileOptions o = options(passes::Int8Options::Stage::off);
  o.disabled_passes = std::move(disabled);
  const runtime::CompiledGraph c = runtime::compile_graph(model, o);
  Compiled r;
  for (int id : c.graph.order()) {
    const ir::Node& n = c.graph.node(id);
    if (n.op == "quantize_dequantize") ++r.pairs;
    if (n.op == "conv2d" || n.op == "conv2d_epilogue") r.conv = n;
  }
  for (const passes::Rejection& j : c.rejections)
    if (j.pass == "quantize_int8") r.refusal = j.reason;
  return r;
}

}  // namespace

// The pair before a convolution becomes the convolution's own int8 input on the pair's grid:
// s8 from zero point 0, u8 from 0, and the two shifted forms that are the same grids (s8 with
// −128 is u8; u8 with 128 is s8).
TEST(QuantizeInt8, AQdqModelsPairBecomesTheConvolutionsInt8Input) {
  struct Form {
    bool is_unsigned;
    int64_t zero_point;
    bool reads_unsigned;
  };
  for (const Form f : {Form{false, 0, false}, Form{true, 0, true}, Form{false, -128, true}, Form{true, 128, false}}) {
    const Compiled c = compile_qdq(qdq_conv(f.is_unsigned, f.zero_point));
    ASSERT_TRUE(c.conv.has_value());
    EXPECT_EQ(c.conv->op, "conv2d_epilogue");
    EXPECT_DOUBLE_EQ(c.conv->attrs.f("int8_input_scale", 0), 0.05) << f.zero_point;
    EXPECT_EQ(c.conv->attrs.i("int8_unsigned", -1), int64_t{f.reads_unsigned}) << f.zero_point;
    EXPECT_EQ(c.pairs, 0) << "the pair had no other reader";
  }
  // Another reader keeps the pair; quantize_int8 off keeps it for the convolution too.
  EXPECT_EQ(compile_qdq(qdq_conv(true, 0, true)).pairs, 1);
  const Compiled off = compile_qdq(qdq_conv(true, 0), {"quantize_int8"});
  EXPECT_EQ(off.pairs, 1);
  ASSERT_TRUE(off.conv.has_value());
  EXPECT_FALSE(off.conv->attrs.has("int8_input_scale"));
}

TEST(QuantizeInt8, AnAsymmetricPairStaysF32WithASentence) {
  const Compiled c = compile_qdq(qdq_conv(false, 9));
  ASSERT_TRUE(c.conv.has_value());
  EXPECT_FALSE(c.conv->attrs.has("int8_input_scale"));
  EXPECT_EQ(c.pairs, 1);
  EXPECT_NE(c.refusal.find("zero point 9 (an asymmetric grid)"), std::string::npos) << c.refusal;
}

TEST(QuantizeInt8, CalibratingAQuantizedModelIsAnError) {
  try {
    runtime::compile_graph(qdq_conv(true, 0), options(passes::Int8Options::Stage::calibrate));
    ADD_FAILURE() << "calibrated a QDQ model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("quantized already"), std::string::npos) << e.what();
  }
}

// The form PyTorch's quantizers give a Conv → ReLU: the relu between the convolution and its
// output pair. fuse_conv_epilogue takes the relu, quantize_int8 the pair as the epilogue's last
// grid, and the next convolution reads that output in int8 without a pair of its own.
TEST(QuantizeInt8, AReluBeforeThePairStaysInTheEpilogueBeforeItsGrid) {
  ir::Graph g;
  const int x = g.add_input("x", {2, 6, 6, 8});
  const ir::Attrs u8{{"scale", 0.05}, {"unsigned", int64_t{1}}, {"zero_point", int64_t{0}}};
  const ir::Attrs window{{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1}}};
  const int q1 = g.add_node1("quantize_dequantize", {x}, u8, "pair1");
  const int y1 = g.add_node1("conv2d", {q1, g.add_parameter("w1", {8, 3, 3, 8}, {})}, window, "conv1");
  const int r = g.add_node1("relu", {y1}, {}, "relu1");
  const int q2 = g.add_node1("quantize_dequantize", {r}, u8, "pair2");
  g.mark_output(g.add_node1("conv2d", {q2, g.add_parameter("w2", {8, 3, 3, 8}, {})}, window, "conv2"));
  const runtime::CompiledGraph c = runtime::compile_graph(g, options(passes::Int8Options::Stage::off));
  std::vector<ops::ConvStages> convs;
  for (int id : c.graph.order()) {
    const ir::Node& n = c.graph.node(id);
    EXPECT_NE(n.op, "quantize_dequantize") << n.name;
    if (n.op == "conv2d_epilogue") convs.push_back(ops::ConvStages::of(n));
  }
  ASSERT_EQ(convs.size(), 2u);
  EXPECT_TRUE(convs[0].int8 && convs[0].relu && convs[0].out_quant.on && !convs[0].mid_quant.on);
  EXPECT_DOUBLE_EQ(convs[0].out_quant.scale, 0.05);
  EXPECT_TRUE(convs[1].int8 && convs[1].int8_unsigned);
  EXPECT_EQ(convs[0].describe(), "u8 input, s8 weights → conv → relu → u8 grid (scale 0.05)");
}
