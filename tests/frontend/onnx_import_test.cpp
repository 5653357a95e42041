// ONNX import against onnxruntime: the models and reference outputs come from
// tests/onnx/make_models.py (a CTest fixture, run with the project's .venv). Small nets cover
// every supported op; ResNet-18/50 run fused and unfused; corrupt files and a fuzz smoke test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/torch_layout.h"
#include "runtime/executable.h"
#include "support/onnx_models.h"
#include "support/tolerance.h"

namespace trident {
namespace {

namespace fs = std::filesystem;
const fs::path kDir = test_support::kOnnxModels;

nlohmann::json manifest() {
  std::ifstream f(kDir / "manifest.json");
  return nlohmann::json::parse(f);
}


std::vector<float> read_floats(const fs::path& p) {
  std::ifstream f(p, std::ios::binary | std::ios::ate);
  std::vector<float> v(static_cast<size_t>(f.tellg()) / 4);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

// NCHW <-> NHWC copies for 4-D tensors; other ranks are identical in both layouts.
std::vector<float> permute(const std::vector<float>& in, const Shape& nchw, bool to_nhwc) {
  if (nchw.size() != 4) return in;
  const int64_t N = nchw[0], C = nchw[1], H = nchw[2], W = nchw[3];
  std::vector<float> out(in.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t hw = 0; hw < H * W; ++hw) {
        const int64_t a = (n * C + c) * H * W + hw, b = (n * H * W + hw) * C + c;
        if (to_nhwc) out[b] = in[a];
        else out[a] = in[b];
      }
  return out;
}

struct RunResult {
  std::vector<double> out;
  size_t fused_nodes = 0;
  size_t winograd_nodes = 0;  // convolutions the cpu backend runs by Winograd's algorithm
  size_t int8_nodes = 0;      // convolutions in int8 (a QDQ model's)
};

// winograd: BackendOptions::winograd (-1 by timing, 0 never, 1 wherever oneDNN has it).
// int8: false disables quantize_int8 as well (a QDQ model's pairs then run in f32).
RunResult run(const std::string& name, const nlohmann::json& ref, bool fused,
              const std::string& backend = "cpu", int winograd = -1, bool int8 = true) {
  const int64_t batch = ref["batch"];
  frontend::OnnxImport imp = frontend::import_onnx((kDir / (name + ".onnx")).string(), {batch});
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Infer;
  opt.backend = backend;
  if (!fused) opt.disabled_passes = {"fold_bn", "fuse_conv_epilogue", "fuse_elementwise"};
  if (!int8) opt.disabled_passes.push_back("quantize_int8");
  auto exe = runtime::Executable::compile(imp.graph, opt, {.winograd = winograd});
  exe->import_weights(imp.weights, true);
  const std::string tag = name + ".b" + std::to_string(batch);
  const auto x = permute(read_floats(kDir / (tag + ".input.bin")), ref["input_shape"], true);
  TensorView in = exe->find(imp.input_name);
  EXPECT_EQ(in.bytes(), x.size() * 4);
  std::memcpy(in.data, x.data(), in.bytes());
  exe->run();
  TensorView y = exe->find(imp.output_names.at(0));
  std::vector<float> got(static_cast<size_t>(y.numel()));
  std::memcpy(got.data(), y.data, y.bytes());
  got = permute(got, ref["output_shape"], false);
  RunResult r;
  r.out.assign(got.begin(), got.end());
  for (int nid : exe->graph().order()) {
    const std::string& op = exe->graph().node(nid).op;
    if (op == "conv2d_epilogue" || op == "fold_batchnorm" || op == "elementwise") ++r.fused_nodes;
    if (op == "conv2d_epilogue" && exe->graph().node(nid).attrs.has("int8_input_scale")) ++r.int8_nodes;
  }
  for (const auto& [node, how] : exe->kernel_implementations())
    if (how.starts_with("winograd")) ++r.winograd_nodes;
  return r;
}

std::vector<double> reference(const std::string& name, const nlohmann::json& ref) {
  const auto v = read_floats(kDir / (name + ".b" + std::to_string(int64_t(ref["batch"])) + ".output.bin"));
  return {v.begin(), v.end()};
}

// max |got - ref| / max |ref|: relative to the output's scale, so near-zero logits do not
// turn a 1e-7 difference into a large ratio.
double max_rel_error(const std::vector<double>& got, const std::vector<double>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(got[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return diff / std::max(scale, 1e-30);
}

TEST(OnnxImport, SmallModelsMatchOnnxruntimeFusedAndUnfused) {
  REQUIRE_ONNX_MODELS();
  int checked = 0;
  const nlohmann::json all = manifest();
  for (const auto& m : all["models"]) {
    if (m["kind"] != "small") continue;
    for (const auto& ref : m["refs"])
      for (const char* backend : {"cpu", "cpu_ref"})
        for (bool fused : {true, false}) {
          const std::string name = m["name"];
          const std::string what = name + " b" + std::to_string(int64_t(ref["batch"])) + " " + backend +
                                   (fused ? " fused" : " unfused");
          RunResult r = run(name, ref, fused, backend);
          test_support::expect_close(r.out, reference(name, ref), DType::f32, what);
          ++checked;
        }
  }
  EXPECT_EQ(checked, 200);  // 50 (model, batch) references, on 2 backends, fused and unfused
}

// ConvNeXt's block in its three exported forms (the TorchScript exporter's composites at opset 13,
// LayerNormalization with Erf GELU at 17, Gelu and the dynamo pooling at 20) becomes the same
// graph: two layernorms over channels, one GELU, the MatMuls as 1×1 convolutions, no transposes.
TEST(OnnxImport, ConvNextBlocksBecomeLayerNormGeluAndConvolutions) {
  REQUIRE_ONNX_MODELS();
  for (const char* file : {"convnext_block_op13.onnx", "convnext_block_op17.onnx", "convnext_block_op20.onnx"}) {
    const auto imp = frontend::import_onnx((kDir / file).string());
    std::map<std::string, int> ops;
    for (int nid : imp.graph.order()) {
      const auto& n = imp.graph.node(nid);
      ++ops[n.op == "activation" ? "activation " + n.attrs.s("fn") : n.op];
    }
    EXPECT_EQ(ops["layernorm"], 2) << file;
    EXPECT_EQ(ops["activation gelu"], 1) << file;
    EXPECT_EQ(ops["conv2d"], 4) << file;  // stem, depthwise, and the two per-pixel MatMuls
    EXPECT_EQ(ops["linear"], 1) << file;
    EXPECT_EQ(ops.size(), 8u) << file;  // + mul (layer scale), add (residual), global_avgpool, flatten
    // The MatMuls are nn.Linear layers to PyTorch: [out, in] matrices in a state dict.
    const frontend::TorchLayout layout = frontend::torch_layout(imp.graph);
    EXPECT_EQ(frontend::torch_shape(layout, "fc1.w", imp.weights.at("fc1.w").shape), (Shape{32, 8})) << file;
    EXPECT_EQ(frontend::torch_shape(layout, "fc2.w", imp.weights.at("fc2.w").shape), (Shape{8, 32})) << file;
    EXPECT_EQ(frontend::torch_shape(layout, "stem.weight", imp.weights.at("stem.weight").shape).size(), 4u) << file;
    // The layer scale is [C] to trident's mul and [C, 1, 1] in the file, as in torchvision's state dict.
    EXPECT_EQ(imp.weights.at("scale").shape, (Shape{8})) << file;
    EXPECT_EQ(frontend::torch_shape(layout, "scale", imp.weights.at("scale").shape), (Shape{8, 1, 1})) << file;
  }
}

TEST(OnnxImport, ImportedGraphHasTridentLayouts) {
  REQUIRE_ONNX_MODELS();
  auto imp = frontend::import_onnx((kDir / "conv_bn_relu_op13.onnx").string(), {3});
  EXPECT_EQ(imp.opset, 13);
  EXPECT_EQ(imp.input_name, "input");
  ASSERT_EQ(imp.output_names.size(), 1u);
  const auto& g = imp.graph;
  EXPECT_EQ(g.value(g.find_value("input")).shape, (Shape{3, 10, 10, 3}));  // batch override, NHWC
  EXPECT_EQ(imp.weights.at("conv.weight").shape, (Shape{8, 3, 3, 3}));      // OHWI
  EXPECT_EQ(imp.weights.at("bn.running_var").shape, (Shape{8}));
  EXPECT_EQ(g.value(g.find_value("bn.running_mean")).role, ir::ValueRole::State);
  bool bn_inference = false;
  for (int nid : g.order())
    if (g.node(nid).op == "batchnorm2d") bn_inference = g.node(nid).attrs.i("training") == 0;
  EXPECT_TRUE(bn_inference);
}

TEST(OnnxImport, TrainingModeBatchNormKeepsTrainingForm) {
  REQUIRE_ONNX_MODELS();
  auto imp = frontend::import_onnx((kDir / "bn_training_op15.onnx").string());
  int bns = 0;
  for (int nid : imp.graph.order()) {
    const auto& n = imp.graph.node(nid);
    if (n.op != "batchnorm2d") continue;
    ++bns;
    EXPECT_EQ(n.attrs.i("training"), 1);
    EXPECT_NEAR(n.attrs.f("momentum"), 0.1, 1e-6);  // ONNX 0.9 is PyTorch's 0.1
  }
  EXPECT_EQ(bns, 1);
  // Inference will use the running statistics where the export means batch statistics: said once.
  ASSERT_EQ(imp.notices.size(), 1u);
  EXPECT_NE(imp.notices[0].find("exported in training mode"), std::string::npos) << imp.notices[0];
  frontend::OnnxOptions train;
  train.train = true;  // training means batch statistics too: nothing to say
  EXPECT_TRUE(frontend::import_onnx((kDir / "bn_training_op15.onnx").string(), train).notices.empty());
  passes::CompileOptions opt;  // inference switches it to the running statistics
  opt.mode = passes::Mode::Infer;
  EXPECT_NO_THROW(runtime::Executable::compile(imp.graph, opt));
}

// Both batch sizes of one ResNet on "cpu": unfused, fused with direct convolutions, and fused
// with Winograd wherever oneDNN has it (a different rounding, within the same 1e-4).
void check_resnet(const std::string& name) {
  const nlohmann::json all = manifest();
  int checked = 0;
  struct Variant {
    const char* what;
    bool fused;
    int winograd;
  };
  for (const auto& m : all["models"]) {
    if (m["name"] != name) continue;
    for (const auto& ref : m["refs"]) {
      const auto want = reference(name, ref);
      for (const Variant v : {Variant{"unfused", false, 0}, Variant{"fused", true, 0},
                              Variant{"fused, winograd", true, 1}}) {
        RunResult r = run(name, ref, v.fused, "cpu", v.winograd);
        const double err = max_rel_error(r.out, want);
        std::cout << "[ onnx ] " << name << " batch " << ref["batch"] << " " << v.what
                  << ": max relative error " << err << " (" << r.fused_nodes << " fused nodes, "
                  << r.winograd_nodes << " by winograd)\n";
        EXPECT_LE(err, 1e-4) << name << " " << v.what;
        if (v.fused) EXPECT_GT(r.fused_nodes, 10u) << name;
        else EXPECT_EQ(r.fused_nodes, 0u) << name;
        if (v.winograd == 0) {
          EXPECT_EQ(r.winograd_nodes, 0u) << name;
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 6) << name;
}

TEST(OnnxImport, ResNet18EvalExportMatchesOnnxruntime) {
  REQUIRE_ONNX_MODELS();
  check_resnet("resnet18_eval");
}
TEST(OnnxImport, ResNet18WithBatchNormMatchesOnnxruntime) {
  REQUIRE_ONNX_MODELS();
  check_resnet("resnet18_bn");
}
TEST(OnnxImport, ResNet50EvalExportMatchesOnnxruntime) {
  REQUIRE_ONNX_MODELS();
  check_resnet("resnet50_eval");
}
TEST(OnnxImport, ResNet50WithBatchNormMatchesOnnxruntime) {
  REQUIRE_ONNX_MODELS();
  check_resnet("resnet50_bn");
}

// ResNet-18 as onnxruntime's quantizer writes it (QDQ; its relus gone into the u8-like grids
// that follow each convolution): every convolution but the image's reads its input in int8, on
// cpu (oneDNN's u8/s8 kernel) and cpu_ref (the decomposition), against onnxruntime running the
// pairs as written; with quantize_int8 off, the pairs run in f32 as their own ops. The grids
// agree, so the differences are rounding ties (x·(1/s) against x/s) and the order of sums.
TEST(OnnxImport, QdqResNet18FromOnnxruntimesQuantizerRunsInInt8) {
  REQUIRE_ONNX_MODELS();
  int checked = 0;
  const nlohmann::json all = manifest();
  for (const auto& m : all["models"]) {
    if (m["kind"] != "qdq") continue;
    const std::string name = m["name"];
    const frontend::OnnxImport imp = frontend::import_onnx((kDir / (name + ".onnx")).string());
    int pairs = 0;
    for (int nid : imp.graph.order()) pairs += imp.graph.node(nid).op == "quantize_dequantize";
    EXPECT_GT(pairs, 20) << name;
    // Per-tensor weights are not on trident's per-channel grid: said once.
    const bool per_tensor = name.ends_with("per_tensor");
    ASSERT_EQ(imp.notices.size(), per_tensor ? 1u : 0u) << name;
    if (per_tensor) {
      EXPECT_NE(imp.notices[0].find("not on trident's grid"), std::string::npos) << imp.notices[0];
    }
    frontend::OnnxOptions train;  // no training through quantization: one sentence
    train.train = true;
    try {
      frontend::import_onnx((kDir / (name + ".onnx")).string(), train);
      ADD_FAILURE() << name << " imported for training";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("a QDQ model is for inference"), std::string::npos) << e.what();
    }
    for (const auto& ref : m["refs"]) {
      const auto want = reference(name, ref);
      struct Variant {
        const char* backend;
        bool int8;
        double tolerance;
      };
      // Per-tensor weights quantized again per channel differ by up to half a level of the
      // tensor's grid: a looser bound there.
      for (const Variant v : {Variant{"cpu", true, per_tensor ? 0.05 : 0.03}, Variant{"cpu_ref", true, per_tensor ? 0.05 : 0.03},
                              Variant{"cpu", false, 0.03}}) {
        const RunResult r = run(name, ref, true, v.backend, -1, v.int8);
        const double err = max_rel_error(r.out, want);
        std::cout << "[ onnx ] " << name << " " << v.backend << (v.int8 ? " int8" : " f32 pairs")
                  << ": max relative error " << err << " (" << r.int8_nodes << " int8 convolutions)\n";
        EXPECT_LE(err, v.tolerance) << name << " " << v.backend;
        EXPECT_EQ(r.int8_nodes, v.int8 ? 19u : 0u) << name << " " << v.backend;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 6);
}

TEST(OnnxImport, CorruptFilesGiveClearErrors) {
  REQUIRE_ONNX_MODELS();
  const std::map<std::string, std::vector<std::string>> expect = {
      {"truncated.onnx", {"truncated.onnx"}},
      {"empty.onnx", {"empty.onnx", "empty"}},
      {"random_bytes.onnx", {"random_bytes.onnx"}},
      {"missing_initializer.onnx", {"Conv", "opset 13", "conv.weight", "missing initializer"}},
      {"unsupported_op.onnx", {"Softmax", "opset 13", "not supported"}},
      {"wrong_dtype.onnx", {"conv.weight", "float64"}},
      {"shape_mismatch.onnx", {"BatchNormalization", "bn.weight", "[8]"}},
      {"absurd_size.onnx", {"conv.weight", "absurdly large"}},
      {"absurd_input.onnx", {"input 'input'", "absurdly large"}},
      {"unsupported_attribute.onnx", {"Conv", "ceil_mode", "opset 13"}},
      {"old_opset.onnx", {"opset 7"}},
      {"flatten_then_relu.onnx", {"Relu", "H*W > 1", "Gemm or MatMul"}},
      {"shuffle_view_read.onnx", {"Relu", "5-D view of a channel shuffle"}},
      {"lone_transpose.onnx", {"Transpose", "only as the middle of a channel shuffle"}},
      {"channels_last_read.onnx", {"Relu", "channels-last Transpose(0,2,3,1) view"}},
      {"shape_gather.onnx", {"Gather", "is computed", "shape arithmetic"}},
      {"shape_div.onnx", {"Div", "only on integer constants"}},
      {"shape_div_by_zero.onnx", {"Div", "divides by zero"}},
      {"pad_reflect.onnx", {"Pad", "opset 13", "mode 'reflect' is not supported", "constant"}},
      {"pad_channels.onnx", {"Pad", "pads axis 1 (C)", "only height and width"}},
      {"slice_height.onnx", {"Slice", "slices axis 2 (H)", "only channels (axis 1)"}},
      {"slice_step.onnx", {"Slice", "step 2", "only step 1"}},
      {"split_width.onnx", {"Split", "splits axis 3 (W)", "only channels (axis 1)"}},
      {"random_uniform_alone.onnx", {"RandomUniformLike", "not supported", "dropout"}},
      {"qdq_integer_read.onnx", {"Conv", "the integers of a QuantizeLinear", "QDQ form"}},
      {"qdq_other_scale.onnx", {"DequantizeLinear", "another scale", "pairs that agree"}},
      {"qdq_lone_dequantize.onnx", {"DequantizeLinear", "which no QuantizeLinear made", "QDQ models"}},
      {"external_shared.onnx", {"shared.bin", "are more than the file's 1152 bytes", "not read twice"}},
  };
  for (const auto& [file, words] : expect) {
    const std::string path = (kDir / file).string();
    try {
      frontend::import_onnx(path);
      ADD_FAILURE() << file << " imported without error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << file << ": " << msg;
    }
  }
  EXPECT_THROW(frontend::import_onnx((kDir / "no_such_file.onnx").string()), Error);
}

// 2000 deterministic mutations (bit flips, byte runs, truncations, splices) of a valid
// model: each import succeeds or throws trident::Error; nothing crashes or allocates wildly.
// The same with 1000 mutations of a small QDQ model (integer weights, quantization pairs).
void fuzz_smoke(const std::string& file, int mutations) {
  std::ifstream f(kDir / file, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(good.empty()) << file;
  std::mt19937_64 rng(1234);
  int ok = 0, rejected = 0;
  for (int i = 0; i < mutations; ++i) {
    std::string s = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8))); break;
        case 1: s[pos] = static_cast<char>(rng()); break;
        case 2: s.resize(std::max<size_t>(1, pos)); break;
        default: s.insert(pos, good.substr(rng() % good.size(), 1 + rng() % 16)); break;
      }
    }
    try {
      frontend::import_onnx_from_memory(s.data(), s.size(), {}, "mutation " + std::to_string(i));
      ++ok;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_EQ(ok + rejected, mutations);
  EXPECT_GT(rejected, 0);
  std::cout << "[ onnx ] fuzz smoke, " << file << ": " << ok << " imported, " << rejected << " rejected\n";
}

TEST(OnnxImport, FuzzSmoke) {
  REQUIRE_ONNX_MODELS();
  fuzz_smoke("ops_a_op13.onnx", 2000);
  fuzz_smoke("qdq_small.onnx", 1000);
}

}  // namespace
}  // namespace trident
