// Weights kept in a file beside the model (ONNX external data, what PyTorch's default exporter
// writes): read from the model's own folder, and nowhere else — a location that is absolute,
// climbs out, or links out is refused, and so is a byte range the file does not hold.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "frontend/onnx/onnx_import.h"
#include "support/onnx_bytes.h"
#include "support/temp_dir.h"

namespace trident {
namespace {

namespace fs = std::filesystem;
using test_support::pb_bytes;
using test_support::pb_int;

// A 1×1 Conv model, input [1,1,1,1] and 4 output channels, whose weight [4,1,1,1] has its data
// in an external file: the (key, value) pairs given, data_location EXTERNAL.
std::string external_conv_model(const std::vector<std::pair<std::string, std::string>>& external) {
  std::string shape;
  for (int i = 0; i < 4; ++i) shape += pb_bytes(1, pb_int(1, 1));
  const std::string type = pb_bytes(1, pb_int(1, 1) + pb_bytes(2, shape));
  const std::string input = pb_bytes(11, pb_bytes(1, "x") + pb_bytes(2, type));
  const std::string output = pb_bytes(12, pb_bytes(1, "y"));
  std::string weight;
  for (int64_t d : {4, 1, 1, 1}) weight += pb_int(1, uint64_t(d));
  weight += pb_int(2, 1) + pb_bytes(8, "w");
  for (const auto& [k, v] : external) weight += pb_bytes(13, pb_bytes(1, k) + pb_bytes(2, v));
  weight += pb_int(14, 1);  // data_location = EXTERNAL
  const std::string node = pb_bytes(1, "x") + pb_bytes(1, "w") + pb_bytes(2, "y") + pb_bytes(3, "conv") +
                           pb_bytes(4, "Conv");
  const std::string graph = pb_bytes(1, node) + pb_bytes(2, "g") + pb_bytes(5, weight) + input + output;
  return pb_int(1, 8) + pb_bytes(7, graph) + pb_bytes(8, pb_int(2, 18));
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string float_bytes(const std::vector<float>& v) {
  std::string raw(v.size() * 4, '\0');
  std::memcpy(raw.data(), v.data(), raw.size());
  return raw;
}

class OnnxExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";
    dir_ = test_support::fresh_temp_dir("onnx_external");
    fs::create_directories(dir_ / "model");
    // 16 bytes of padding, then the four weights: offsets are honoured.
    write_file(dir_ / "model" / "weights.bin", std::string(16, '\0') + float_bytes({1, 2, 3, 4}));
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // Imports model bytes written to model/net.onnx; returns the Error's message, "" on success.
  std::string import_error(const std::vector<std::pair<std::string, std::string>>& external) {
    const fs::path model = dir_ / "model" / "net.onnx";
    write_file(model, external_conv_model(external));
    try {
      frontend::import_onnx(model.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(OnnxExternalData, WeightsBesideTheModelAreRead) {
  const fs::path model = dir_ / "model" / "net.onnx";
  write_file(model, external_conv_model({{"location", "weights.bin"}, {"offset", "16"}, {"length", "16"}}));
  const frontend::OnnxImport imp = frontend::import_onnx(model.string());
  ASSERT_EQ(imp.weights.count("w"), 1u);
  const std::vector<float> want{1, 2, 3, 4};  // [4,1,1,1] is the same in OIHW and OHWI
  const auto& w = imp.weights.at("w");
  ASSERT_EQ(w.shape, (Shape{4, 1, 1, 1}));
  ASSERT_EQ(w.data.size(), 16u);
  std::vector<float> got(4);
  std::memcpy(got.data(), w.data.data(), 16);
  EXPECT_EQ(got, want);
  // Without a length the data runs to the end of the file.
  EXPECT_EQ(import_error({{"location", "weights.bin"}, {"offset", "16"}}), "");
}

TEST_F(OnnxExternalData, ALocationOutsideTheModelsFolderIsRefused) {
  write_file(dir_ / "outside.bin", float_bytes({1, 2, 3, 4}));
  EXPECT_NE(import_error({{"location", (dir_ / "outside.bin").string()}}).find("is absolute"), std::string::npos);
  EXPECT_NE(import_error({{"location", "../outside.bin"}}).find("climbs out"), std::string::npos);
  fs::create_symlink(dir_ / "outside.bin", dir_ / "model" / "link.bin");
  EXPECT_NE(import_error({{"location", "link.bin"}}).find("resolves outside"), std::string::npos);
  EXPECT_NE(import_error({{"location", "missing.bin"}}).find("cannot be opened"), std::string::npos);
  EXPECT_NE(import_error({{"offset", "0"}}).find("names none"), std::string::npos);
}

TEST_F(OnnxExternalData, ARangeTheFileDoesNotHoldIsRefused) {
  const std::string past = import_error({{"location", "weights.bin"}, {"offset", "40"}});
  EXPECT_NE(past.find("past the end"), std::string::npos) << past;
  const std::string longer = import_error({{"location", "weights.bin"}, {"offset", "16"}, {"length", "32"}});
  EXPECT_NE(longer.find("runs past the end"), std::string::npos) << longer;
  const std::string bad = import_error({{"location", "weights.bin"}, {"offset", "-4"}});
  EXPECT_NE(bad.find("not a byte count"), std::string::npos) << bad;
  // 8 bytes where 4 floats need 16: the element count check of inline data applies.
  const std::string short_data = import_error({{"location", "weights.bin"}, {"offset", "24"}});
  EXPECT_NE(short_data.find("declares 4 elements"), std::string::npos) << short_data;
}

TEST_F(OnnxExternalData, AModelGivenAsBytesCannotReachFiles) {
  const std::string bytes = external_conv_model({{"location", "weights.bin"}, {"offset", "16"}});
  try {
    frontend::import_onnx_from_memory(bytes.data(), bytes.size());
    FAIL() << "imported external data without a folder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only when the model is loaded from its own file"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace trident
