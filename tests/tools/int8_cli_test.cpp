// `trident infer --precision int8` through the real binary: calibrated on a .npy of images, its
// convolutions but the first run in int8 and its logits stay near fp32's on the same input; the
// flags that do not belong together, a missing or misshapen calibration file each get one sentence and a non-zero exit;
// a folder of images calibrates too, its unreadable files skipped and counted.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include <sys/stat.h>

#include "core/random.h"
#include "runtime/npy.h"
#include "support/image_folder.h"
#include "support/run_binary.h"

namespace {

using trident::test_support::run_trident;

// A folder of the running test's own (ctest runs the tests of this file side by side).
std::filesystem::path dir() {
  const auto p = std::filesystem::temp_directory_path() /
                 (std::string("trident_int8_cli_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(p);
  return p;
}

std::string images(const std::string& name, int64_t n, uint64_t seed, int64_t size = 32) {
  trident::HostTensor t{{n, 3, size, size}, trident::DType::f32,
                        std::vector<std::byte>(static_cast<size_t>(n * 3 * size * size) * 4)};
  trident::Rng rng(seed);
  auto* p = reinterpret_cast<float*>(t.data.data());
  for (int64_t i = 0; i < n * 3 * size * size; ++i) p[i] = static_cast<float>(rng.normal());
  const std::string path = (dir() / name).string();
  trident::runtime::write_npy(path, t);
  return path;
}

std::vector<float> floats(const std::string& npy) {
  const trident::HostTensor t = trident::runtime::read_npy(npy);
  const auto* p = reinterpret_cast<const float*>(t.data.data());
  return std::vector<float>(p, p + t.data.size() / 4);
}

const std::string kModel = "infer --model resnet_cifar --iterations 1 --warmup 0 --plan-cache off ";

TEST(Int8Cli, ConvolutionsRunInInt8NearTheirF32Outputs) {
  const std::string calib = images("calib.npy", 32, 1), input = images("input.npy", 4, 2);
  const std::string out8 = (dir() / "int8.npy").string(), out32 = (dir() / "f32.npy").string();
  const auto r8 = run_trident(kModel + "--input " + input + " --output " + out8 +
                              " --precision int8 --calibration " + calib + " --json", false);
  ASSERT_EQ(r8.code, 0) << r8.output;
  const nlohmann::json j = nlohmann::json::parse(r8.output.substr(r8.output.find('{')));
  ASSERT_TRUE(j.contains("int8")) << r8.output;
  EXPECT_GT(j["int8"]["int8_convolutions"].get<int>(), 0);
  EXPECT_EQ(j["int8"]["f32_convolutions"].get<int>(), 1);  // the first layer, on the image
  EXPECT_EQ(j["int8"]["calibration_images"].get<int>(), 32);
  EXPECT_EQ(j["int8"]["calibrator"], "entropy");
  const auto r32 = run_trident(kModel + "--input " + input + " --output " + out32, false);
  ASSERT_EQ(r32.code, 0) << r32.output;
  const std::vector<float> a = floats(out8), b = floats(out32);
  ASSERT_EQ(a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  EXPECT_LT(diff / scale, 0.1) << "int8 logits against f32";
}

TEST(Int8Cli, EachCalibratorRuns) {
  const std::string calib = images("calib_each.npy", 8, 3);
  for (const char* c : {"percentile", "max"}) {
    const auto r = run_trident(kModel + "--batch 4 --precision int8 --calibration " + calib + " --calibrator " + c, false);
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(std::string("int8: ")), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(std::string(c) + " calibration on 8 images"), std::string::npos) << r.output;
  }
}

// A folder of the user's images: resized and centre-cropped to the model's side; a damaged file
// and a FIFO among them are skipped and counted, never waited on.
TEST(Int8Cli, CalibratesOnAFolderOfImages) {
  const std::filesystem::path folder = dir() / "images";
  std::filesystem::remove_all(folder);
  trident::test_support::write_class_images(folder, "train", 2, 5, 40, 36);  // 10 images, JPEG and PNG
  trident::test_support::write_file(folder / "train" / "class0" / "damaged.jpg", {0xFF, 0xD8, 0xFF, 0x00, 0x01});
  ASSERT_EQ(mkfifo((folder / "train" / "class1" / "pipe.png").c_str(), 0600), 0);
  const auto r = run_trident(kModel + "--batch 4 --precision int8 --calibration " + folder.string() + " --json", false);
  ASSERT_EQ(r.code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j["int8"]["calibration_folder"]["images_listed"], 11);  // the FIFO is no regular file
  EXPECT_EQ(j["int8"]["calibration_folder"]["images_skipped"], 1);
  EXPECT_EQ(j["int8"]["calibration_images"], 10);  // the 10 read, one batch
  EXPECT_GT(j["int8"]["int8_convolutions"].get<int>(), 0);
  const std::filesystem::path empty = dir() / "empty";
  std::filesystem::create_directories(empty);
  const auto none = run_trident(kModel + "--precision int8 --calibration " + empty.string());
  EXPECT_NE(none.code, 0);
  EXPECT_NE(none.output.find("holds no .jpg, .jpeg or .png image"), std::string::npos) << none.output;
  const auto gray = run_trident("infer --model fmnist_cnn --iterations 1 --warmup 0 --precision int8 --calibration " +
                                folder.string());
  EXPECT_NE(gray.code, 0);
  EXPECT_NE(gray.output.find("needs a model of square RGB images"), std::string::npos) << gray.output;
}

TEST(Int8Cli, WrongCombinationsAndFilesAreOneSentence) {
  const std::string calib = images("calib_few.npy", 2, 4), wrong = images("calib_wrong.npy", 8, 5, 28);
  struct Bad {
    std::string args, says;
  };
  const Bad bad[] = {
      {"--precision int8", "--precision int8 needs --calibration FILE.npy or DIR"},
      {"--calibration " + calib, "--calibration is for --precision int8"},
      {"--batch 4 --precision int8 --calibration " + wrong, "the calibration images have shape [8,3,28,28]"},
      {"--precision int8 --calibration " + (dir() / "missing.npy").string(), "missing.npy"},
      {"--precision int8 --calibration " + calib + " --calibrator minmax", "--calibrator"},
  };
  for (const Bad& b : bad) {
    const auto r = run_trident(kModel + b.args);
    EXPECT_NE(r.code, 0) << b.args;
    EXPECT_NE(r.output.find(b.says), std::string::npos) << b.args << "\n" << r.output;
  }
}

}  // namespace
