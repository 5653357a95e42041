// A run's settings travel with its checkpoint: `--resume CKPT` alone continues an image-folder run
// (its data, limits and crop size from the checkpoint) and keeps saving to CKPT; `export CKPT`
// exports the model the checkpoint names, with the extents the folder gave it (an ONNX model that
// changed since is refused: onnx_train_cli_test.cpp). `--weights` from a run with other classes stops at the
// classifier and says how to fine-tune; `--skip-mismatched` does, listing what it skipped.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/image_folder.h"
#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace trident {
namespace {

namespace fs = std::filesystem;
using test_support::run_trident;

const std::string kCommon = " --model fmnist_cnn --batch 4 --workers 2 --threads 1 --device cpu_ref";

TEST(RunSettingsCli, ResumeAndExportNeedOnlyTheCheckpoint) {
  const fs::path d = test_support::fresh_temp_dir("cli_run_settings");
  test_support::write_class_images(d / "images", "train", 2, 10, 24, 24);
  test_support::write_class_images(d / "images", "val", 2, 4, 24, 24);
  const std::string ckpt = (d / "run.ckpt").string();
  const auto first = run_trident("train" + kCommon + " --data " + (d / "images").string() +
                                 " --image-size 16 --train-limit 12 --test-limit 6 --epochs 1 --save " + ckpt);
  ASSERT_EQ(first.code, 0) << first.output;
  // From another folder, with no flag but the checkpoint: the same data, sample and crops.
  const fs::path elsewhere = d / "elsewhere";
  fs::create_directories(elsewhere);
  const auto resumed = run_trident("train --resume " + ckpt + " --epochs 2 --threads 1 --json", false);
  ASSERT_EQ(resumed.code, 0) << run_trident("train --resume " + ckpt + " --epochs 2 --threads 1").output;
  EXPECT_NE(resumed.output.find("\"dataset\":\"" + (d / "images" / "train").string() + "[12 of 20, seed 1]\""),
            std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("\"event\":\"checkpoint\",\"path\":\"" + ckpt + "\""), std::string::npos)
      << "a resumed run keeps saving to its checkpoint: " << resumed.output;
  // A flag that contradicts the checkpoint is one sentence.
  const auto contradiction = run_trident("train --resume " + ckpt + " --image-size 24 --epochs 3");
  EXPECT_EQ(contradiction.code, 1) << contradiction.output;
  EXPECT_NE(contradiction.output.find("--image-size differs from the checkpoint"), std::string::npos)
      << contradiction.output;
  // export takes the checkpoint's model at the folder's extents (3x16x16, 2 classes).
  const auto exported = run_trident("export " + ckpt + " --output " + (d / "state.safetensors").string());
  EXPECT_EQ(exported.code, 0) << exported.output;
  EXPECT_NE(exported.output.find("from fmnist_cnn"), std::string::npos) << exported.output;
  fs::remove_all(d);
}

TEST(RunSettingsCli, WeightsOfAnotherHeadStopUnlessSkipped) {
  const fs::path d = test_support::fresh_temp_dir("cli_fine_tune");
  test_support::write_class_images(d / "three", "train", 3, 4, 20, 20);
  test_support::write_class_images(d / "three", "val", 3, 2, 20, 20);
  test_support::write_class_images(d / "two", "train", 2, 4, 20, 20);
  test_support::write_class_images(d / "two", "val", 2, 2, 20, 20);
  const std::string pretrained = (d / "three.ckpt").string();
  ASSERT_EQ(run_trident("train" + kCommon + " --data " + (d / "three").string() +
                        " --image-size 16 --epochs 1 --save " + pretrained)
                .code,
            0);
  const std::string tune = "train" + kCommon + " --data " + (d / "two").string() + " --image-size 16 --epochs 1 --weights " +
                           pretrained;
  const auto refused = run_trident(tune);
  EXPECT_EQ(refused.code, 1) << refused.output;
  EXPECT_NE(refused.output.find("fc.bias f32[3] (the model's f32[2])"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("--skip-mismatched"), std::string::npos) << refused.output;
  const auto tuned = run_trident(tune + " --skip-mismatched");
  EXPECT_EQ(tuned.code, 0) << tuned.output;
  EXPECT_NE(tuned.output.find("trident: notice: skipped 2 tensors of '" + pretrained + "'"), std::string::npos)
      << tuned.output;
  EXPECT_NE(tuned.output.find("fc.weight f32[3,"), std::string::npos) << tuned.output;
  const auto alone = run_trident("train --synthetic --skip-mismatched --epochs 1");
  EXPECT_EQ(alone.code, 1) << alone.output;
  EXPECT_NE(alone.output.find("--skip-mismatched applies to --weights"), std::string::npos) << alone.output;
  fs::remove_all(d);
}

}  // namespace
}  // namespace trident
