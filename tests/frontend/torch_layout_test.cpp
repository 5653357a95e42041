// PyTorch's weight layouts (frontend/torch_layout.h): the two conversions on hand-
// indexed tensors, which model tensors get which conversion, the round trip, telling the two
// layouts apart, I64 tensors (num_batches_tracked) in safetensors, and the sentences for
// tensors that fit neither layout. onnx/check_export.py checks the same layouts against
// onnxruntime end to end.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "core/tensor_layout.h"
#include "frontend/torch_layout.h"
#include "frontend/zoo.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/weight_file.h"
#include "runtime/executable.h"

using namespace trident;
using namespace trident::frontend;
using namespace trident::runtime;

namespace {

HostTensor iota(Shape shape) {
  HostTensor t{shape, DType::f32, std::vector<std::byte>(numel(shape) * sizeof(float))};
  auto* f = reinterpret_cast<float*>(t.data.data());
  for (int64_t i = 0; i < numel(shape); ++i) f[i] = static_cast<float>(i);
  return t;
}
float at(const HostTensor& t, int64_t i) { return reinterpret_cast<const float*>(t.data.data())[i]; }

WeightMap random_weights(const ir::Graph& model) {
  passes::CompileOptions c;
  c.mode = passes::Mode::Infer;
  auto exe = Executable::compile(model, c);
  exe->init_parameters(11);
  return exe->export_weights();
}

// A safetensors file in memory from a header and raw data bytes.
std::vector<std::byte> file_bytes(const std::string& header, const std::vector<std::byte>& data) {
  std::vector<std::byte> out(8 + header.size());
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i, n >>= 8) out[i] = static_cast<std::byte>(n & 0xff);
  std::memcpy(out.data() + 8, header.data(), header.size());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace

TEST(TorchLayout, ConvolutionWeightsAreOihw) {
  const HostTensor ohwi = iota({2, 3, 4, 5});  // [K, R, S, C]
  const HostTensor oihw = ohwi_to_oihw(ohwi);
  ASSERT_EQ(oihw.shape, (Shape{2, 5, 3, 4}));
  // oihw[k, c, r, s] = ohwi[k, r, s, c]
  for (int64_t k : {0, 1})
    for (int64_t c : {0, 4})
      for (int64_t r : {0, 2})
        for (int64_t s : {1, 3}) EXPECT_EQ(at(oihw, ((k * 5 + c) * 3 + r) * 4 + s), at(ohwi, ((k * 3 + r) * 4 + s) * 5 + c));
  EXPECT_EQ(oihw_to_ohwi(oihw).data, ohwi.data);
}

TEST(TorchLayout, FlattenedColumnsFollowTheNchwOrder) {
  const int64_t C = 3, H = 2, W = 4;
  const HostTensor hwc = iota({5, C * H * W});
  const HostTensor chw = hwc_columns_to_chw(hwc, C, H, W);
  EXPECT_EQ(chw.shape, hwc.shape);
  for (int64_t o = 0; o < 5; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          EXPECT_EQ(at(chw, o * C * H * W + (c * H + h) * W + w), at(hwc, o * C * H * W + (h * W + w) * C + c));
  EXPECT_EQ(chw_columns_to_hwc(chw, C, H, W).data, hwc.data);
  EXPECT_THROW(hwc_columns_to_chw(iota({5, 7}), C, H, W), Error);
}

TEST(TorchLayout, WhichTensorsConvert) {
  const ir::Graph model = frontend::build_model("fmnist_cnn", {1});
  const TorchLayout layout = torch_layout(model);
  int convs = 0, columns = 0;
  for (const auto& [name, c] : layout.conversions) {
    convs += c.kind == TorchLayout::Kind::conv_weight;
    if (c.kind == TorchLayout::Kind::flattened_columns) {
      ++columns;
      EXPECT_GT(c.H * c.W, 1) << name;
    }
  }
  EXPECT_EQ(convs, 3);
  EXPECT_EQ(columns, 1) << "the classifier reads the flattened feature map";
  EXPECT_EQ(layout.batch_counters.size(), 3u);
  // After global pooling the flatten has one position: no column permutation.
  const TorchLayout resnet = torch_layout(frontend::build_model("resnet_cifar", {1}));
  for (const auto& [name, c] : resnet.conversions) EXPECT_EQ(c.kind, TorchLayout::Kind::conv_weight) << name;
}

// A 1×1 convolution imported from a MatMul over channels-last features is nn.Linear in PyTorch:
// its state-dict weight is [K, C] (the same bytes as trident's [K, 1, 1, C]), its ONNX weight an
// OIHW Conv weight; a real 1×1 convolution stays OIHW in both.
TEST(TorchLayout, PerPixelLinearIsAnOutInMatrix) {
  ir::Graph g;
  const int x = g.add_input("x", {1, 2, 2, 3});
  const int lw = g.add_parameter("fc.weight", {4, 1, 1, 3}, {ir::Init::Zeros});
  const int cw = g.add_parameter("pw.weight", {5, 1, 1, 4}, {ir::Init::Zeros});
  const ir::Attrs one_by_one{{"stride", Shape{1, 1}}, {"padding", Shape{0, 0}}};
  ir::Attrs from_matmul = one_by_one;
  from_matmul.set("from_matmul", int64_t{1});
  const int y = g.add_node1("conv2d", {x, lw}, from_matmul, "fc");
  g.add_node1("conv2d", {y, cw}, one_by_one, "pw");
  const TorchLayout layout = torch_layout(g);
  EXPECT_EQ(layout.conversions.at("fc.weight").kind, TorchLayout::Kind::pointwise_linear);
  EXPECT_EQ(layout.conversions.at("pw.weight").kind, TorchLayout::Kind::conv_weight);
  EXPECT_EQ(torch_shape(layout, "fc.weight", {4, 1, 1, 3}), (Shape{4, 3}));
  EXPECT_EQ(torch_shape(layout, "pw.weight", {5, 1, 1, 4}), (Shape{5, 4, 1, 1}));

  const WeightMap ours{{"fc.weight", iota({4, 1, 1, 3})}, {"pw.weight", iota({5, 1, 1, 4})}};
  const WeightMap sd = to_torch_state_dict(layout, ours, 0);
  ASSERT_EQ(sd.at("fc.weight").shape, (Shape{4, 3}));
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(at(sd.at("fc.weight"), k * 3 + c), at(ours.at("fc.weight"), k * 3 + c));
  const HostTensor matmul = to_onnx_tensor(layout, "fc.weight", ours.at("fc.weight"));
  ASSERT_EQ(matmul.shape, (Shape{3, 4}));  // a MatMul's [in, out], as PyTorch exports nn.Linear over pixels
  for (int64_t k = 0; k < 4; ++k)
    for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(at(matmul, c * 4 + k), at(ours.at("fc.weight"), k * 3 + c));
  EXPECT_EQ(to_onnx_tensor(layout, "pw.weight", ours.at("pw.weight")).shape, (Shape{5, 4, 1, 1}));
  const WeightMap back = from_torch_state_dict(layout, sd, "sd");
  EXPECT_EQ(back.at("fc.weight").shape, (Shape{4, 1, 1, 3}));
  EXPECT_EQ(back.at("fc.weight").data, ours.at("fc.weight").data);
  EXPECT_EQ(back.at("pw.weight").data, ours.at("pw.weight").data);
  EXPECT_TRUE(is_torch_state_dict(layout, g, sd, {}));     // [K, C] fits only PyTorch's layout
  EXPECT_FALSE(is_torch_state_dict(layout, g, ours, {}));  // [K, 1, 1, C] only trident's

  WeightMap bad = sd;
  bad["fc.weight"] = iota({4, 3, 1, 1});
  try {
    from_torch_state_dict(layout, bad, "bad.safetensors");
    FAIL() << "a 4-D weight for a linear layer was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[out, in] matrix of a linear layer"), std::string::npos) << e.what();
  }
}

// A per-channel factor the model declared as [C, 1, 1] (ConvNeXt's layer scale; the importer
// marks the mul with factor_dims) is [C] to trident and [C, 1, 1] in a state dict and in ONNX;
// a [C] one from an older export still loads. An unmarked factor keeps its shape.
TEST(TorchLayout, PerChannelFactorKeepsTheShapeTheModelDeclared) {
  ir::Graph g;
  const int x = g.add_input("x", {1, 2, 2, 3});
  const int scale = g.add_parameter("layer_scale", {3}, {ir::Init::Ones});
  const int plain = g.add_parameter("plain_scale", {3}, {ir::Init::Ones});
  const int y = g.add_node1("mul", {x, scale}, {{"factor_dims", Shape{3, 1, 1}}}, "scaled");
  g.add_node1("mul", {y, plain}, {}, "scaled_again");
  const TorchLayout layout = torch_layout(g);
  ASSERT_EQ(layout.conversions.count("layer_scale"), 1u);
  EXPECT_EQ(layout.conversions.at("layer_scale").kind, TorchLayout::Kind::channel_factor);
  EXPECT_EQ(layout.conversions.count("plain_scale"), 0u);
  EXPECT_EQ(torch_shape(layout, "layer_scale", {3}), (Shape{3, 1, 1}));

  const WeightMap ours{{"layer_scale", iota({3})}, {"plain_scale", iota({3})}};
  const WeightMap sd = to_torch_state_dict(layout, ours, 0);
  EXPECT_EQ(sd.at("layer_scale").shape, (Shape{3, 1, 1}));
  EXPECT_EQ(sd.at("layer_scale").data, ours.at("layer_scale").data);
  EXPECT_EQ(sd.at("plain_scale").shape, (Shape{3}));
  EXPECT_EQ(to_onnx_tensor(layout, "layer_scale", ours.at("layer_scale")).shape, (Shape{3, 1, 1}));
  EXPECT_TRUE(is_torch_state_dict(layout, g, sd, {}));
  EXPECT_FALSE(is_torch_state_dict(layout, g, ours, {}));
  const WeightMap back = from_torch_state_dict(layout, sd, "sd");
  EXPECT_EQ(back.at("layer_scale").shape, (Shape{3}));
  EXPECT_EQ(back.at("layer_scale").data, ours.at("layer_scale").data);
  EXPECT_EQ(from_torch_state_dict(layout, ours, "older").at("layer_scale").shape, (Shape{3}));

  WeightMap bad = sd;
  bad["layer_scale"] = iota({1, 3});
  try {
    from_torch_state_dict(layout, bad, "bad.safetensors");
    FAIL() << "a [1, 3] layer scale was accepted for a [3, 1, 1] one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("per-channel factor of shape [3,1,1]"), std::string::npos) << e.what();
  }
}

TEST(TorchLayout, StateDictRoundTripAndCounters) {
  const ir::Graph model = frontend::build_model("fmnist_cnn", {1});
  const TorchLayout layout = torch_layout(model);
  const WeightMap ours = random_weights(model);
  const WeightMap sd = to_torch_state_dict(layout, ours, 123);
  for (const std::string& counter : layout.batch_counters) {
    ASSERT_TRUE(sd.count(counter)) << counter;
    EXPECT_EQ(sd.at(counter).shape, Shape{});
    int32_t v;
    std::memcpy(&v, sd.at(counter).data.data(), sizeof v);
    EXPECT_EQ(v, 123);
  }
  const WeightMap back = from_torch_state_dict(layout, sd, "sd");
  for (const std::string& name : layout.model_tensors) {
    ASSERT_TRUE(back.count(name)) << name;
    EXPECT_EQ(back.at(name).shape, ours.at(name).shape) << name;
    EXPECT_EQ(back.at(name).data, ours.at(name).data) << name;
  }
  WeightMap missing = ours;
  missing.erase(layout.model_tensors.front());
  EXPECT_THROW(to_torch_state_dict(layout, missing, 0), Error);
}

TEST(TorchLayout, TellsTheLayoutsApartByContent) {
  const ir::Graph model = frontend::build_model("fmnist_cnn", {1});
  const TorchLayout layout = torch_layout(model);
  const WeightMap ours = random_weights(model);
  WeightMap sd = to_torch_state_dict(layout, ours, 0);
  EXPECT_FALSE(is_torch_state_dict(layout, model, ours, {{"format", kCheckpointFormat}}));
  EXPECT_FALSE(is_torch_state_dict(layout, model, ours, {}));  // OHWI shapes fit only trident's layout
  EXPECT_TRUE(is_torch_state_dict(layout, model, sd, {}));     // counters
  EXPECT_TRUE(is_torch_state_dict(layout, model, sd, {{"format", "pt"}}));
  for (const std::string& c : layout.batch_counters) sd.erase(c);
  EXPECT_TRUE(is_torch_state_dict(layout, model, sd, {}));  // OIHW shapes fit only PyTorch's layout
}

TEST(TorchLayout, MisShapedTensorIsOneSentence) {
  const ir::Graph model = frontend::build_model("fmnist_cnn", {1});
  const TorchLayout layout = torch_layout(model);
  WeightMap sd = to_torch_state_dict(layout, random_weights(model), 0);
  const std::string conv = layout.conversions.begin()->first;
  sd[conv] = iota({4, 4});
  try {
    from_torch_state_dict(layout, sd, "bad.safetensors");
    FAIL() << "a 2-D convolution weight was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bad.safetensors"), std::string::npos) << what;
    EXPECT_NE(what.find(conv), std::string::npos) << what;
  }
}

TEST(Safetensors, I64TensorsReadAsI32AndOutOfRangeIsRefused) {
  const std::string header = R"({"n.num_batches_tracked":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})";
  std::vector<std::byte> data(8);
  int64_t v = 4242;
  std::memcpy(data.data(), &v, 8);
  const WeightMap w = read_safetensors_from_memory(file_bytes(header, data), "sd");
  ASSERT_EQ(w.at("n.num_batches_tracked").dtype, DType::i32);
  int32_t got;
  std::memcpy(&got, w.at("n.num_batches_tracked").data.data(), 4);
  EXPECT_EQ(got, 4242);
  v = int64_t{1} << 40;
  std::memcpy(data.data(), &v, 8);
  try {
    read_safetensors_from_memory(file_bytes(header, data), "sd");
    FAIL() << "an I64 value past 32 bits was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the 32-bit range"), std::string::npos) << e.what();
  }
  // The byte range must hold 8 bytes an element.
  const std::string short_header = R"({"t":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_THROW(read_safetensors_from_memory(file_bytes(short_header, data), "sd"), Error);
}
