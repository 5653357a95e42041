// `trident train --data <image folder>`: a zoo model takes the folder's shape and classes, the
// loss falls, each epoch reports how long it waited for input and evaluates val, unreadable
// images are counted, and a folder laid out wrongly is one sentence.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "support/image_folder.h"
#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace trident {
namespace {

namespace fs = std::filesystem;
using test_support::run_trident;

const std::string kTrain = "train --model fmnist_cnn --image-size 32 --batch 8 --workers 2 --threads 1 --data ";

// `field` of every JSON line whose event is `event`, in order.
std::vector<double> json_numbers(const std::string& out, const std::string& event, const std::string& field) {
  std::vector<double> v;
  const std::regex object(R"(\{[^}]*\})"), number("\"" + field + "\":([0-9.eE+-]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), object); it != std::sregex_iterator(); ++it) {
    const std::string line = it->str();
    std::smatch m;
    if (line.find("\"event\":\"" + event + "\"") != std::string::npos && std::regex_search(line, m, number))
      v.push_back(std::stod(m[1]));
  }
  return v;
}

TEST(ImageFolderCli, TrainsAZooModelOnTheFolderAndTheLossFalls) {
  const fs::path d = test_support::fresh_temp_dir("cli_folder_train");
  test_support::write_class_images(d, "train", 2, 24, 40, 36);
  test_support::write_class_images(d, "val", 2, 6, 40, 36);
  const auto r = run_trident(kTrain + d.string() + " --epochs 3 --lr 0.05 --json", false);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<double> losses = json_numbers(r.output, "epoch", "loss");
  ASSERT_EQ(losses.size(), 3u) << r.output;
  EXPECT_LT(losses.back(), 0.8 * losses.front()) << r.output;
  EXPECT_EQ(json_numbers(r.output, "epoch", "data_wait_seconds").size(), 3u) << r.output;
  EXPECT_EQ(json_numbers(r.output, "start", "train_images"), std::vector<double>{48}) << r.output;
  // val after every epoch, and the last evaluation is the result: two classes told by colour.
  EXPECT_EQ(json_numbers(r.output, "eval", "images"), (std::vector<double>{12, 12, 12})) << r.output;
  const std::vector<double> acc = json_numbers(r.output, "test", "accuracy");
  ASSERT_EQ(acc.size(), 1u) << r.output;
  EXPECT_GT(acc[0], 0.75) << r.output;
  EXPECT_NE(r.output.find("\"split\":\"val\""), std::string::npos) << r.output;
  fs::remove_all(d);
}

TEST(ImageFolderCli, ReportsTheWaitForInputAndSkippedImagesOnStderr) {
  const fs::path d = test_support::fresh_temp_dir("cli_folder_skip");
  test_support::write_class_images(d, "train", 2, 8, 20, 20);
  test_support::write_class_images(d, "val", 2, 2, 20, 20);
  const fs::path bad = d / "train" / "class0" / "broken.png";
  test_support::write_file(bad, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 1, 2, 3});
  const auto r = run_trident(kTrain + d.string() + " --epochs 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(data: waited [0-9.]+ s of [0-9.]+ s \([0-9]+ %\) for input)")))
      << r.output;
  EXPECT_NE(r.output.find("data: skipped 1 unreadable image of '" + (d / "train").string() + "' (the first: '" +
                          bad.string() + "' is not a readable PNG: "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("val accuracy "), std::string::npos) << r.output;
  fs::remove_all(d);
}

TEST(ImageFolderCli, AWrongLayoutIsOneSentence) {
  const fs::path d = test_support::fresh_temp_dir("cli_folder_layout");
  test_support::write_class_images(d, "train", 2, 2, 12, 12);
  const auto missing = run_trident(kTrain + d.string() + " --epochs 1");
  EXPECT_EQ(missing.code, 1) << missing.output;
  EXPECT_EQ(missing.output, "trident: error: the image folder '" + d.string() +
                                "' has no val/ folder; an image folder holds DIR/train/<class>/ and DIR/val/<class>/ "
                                "with .jpg, .jpeg or .png images\n");
  test_support::write_class_images(d, "val", 2, 2, 12, 12);
  fs::create_directories(d / "val" / "class1" / "sub");
  test_support::write_file(d / "val" / "class1" / "sub" / "labels.csv", {'a'});
  // A file that is no image is passed over and counted, as torchvision's ImageFolder passes it over.
  const auto other = run_trident("train --model fmnist_cnn --image-size 32 --batch 2 --workers 2 --threads 1 --data " +
                                 d.string() + " --epochs 1");
  EXPECT_EQ(other.code, 0) << other.output;
  EXPECT_NE(other.output.find("data: passed over 1 file of '" + (d / "val").string() +
                              "' that is no .jpg, .jpeg or .png image (the first: '" +
                              (d / "val" / "class1" / "sub" / "labels.csv").string() + "')"),
            std::string::npos)
      << other.output;

  const auto not_a_folder = run_trident("train --synthetic --image-size 32 --epochs 1");
  EXPECT_EQ(not_a_folder.code, 1) << not_a_folder.output;
  EXPECT_NE(not_a_folder.output.find("--image-size applies to image folders"), std::string::npos) << not_a_folder.output;
  fs::remove_all(d);
}

}  // namespace
}  // namespace trident
