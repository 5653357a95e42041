// train --save through the real binary: a path it cannot write is refused before the first
// epoch (it used to train the epoch first), and a path another run is saving to is refused
// with one sentence instead of the two runs overwriting each other.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/path_lock.h"
#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using trident::test_support::RunResult;
using trident::test_support::run_trident;

namespace {

const std::string kTrain = "train --synthetic --train-limit 64 --test-limit 32 --batch 32 --backend cpu_ref --json";

// Exit 1, one line on stderr containing `needle`, and no epoch trained (no event on stdout).
void expect_refused_before_training(const std::string& args, const std::string& needle) {
  const RunResult r = run_trident(args + " 2>&1", true);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\"event\""), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

}  // namespace

TEST(SaveCli, AnUnwritableSavePathIsRefusedBeforeTheFirstEpoch) {
  const fs::path d = trident::test_support::fresh_temp_dir("save_cli_unwritable");
  fs::create_directory(d / "dir.ckpt");
  ASSERT_EQ(::mkfifo((d / "fifo.ckpt").c_str(), 0600), 0);
  std::ofstream(d / "file") << "x";
  expect_refused_before_training(kTrain + " --save " + (d / "dir.ckpt").string(), "it is a directory");
  expect_refused_before_training(kTrain + " --save " + (d / "fifo.ckpt").string(), "FIFO");
  expect_refused_before_training(kTrain + " --save " + (d / "file" / "x.ckpt").string(), "--save");
  fs::remove_all(d);
}

TEST(SaveCli, ASecondRunSavingToTheSamePathIsRefused) {
  const fs::path d = trident::test_support::fresh_temp_dir("save_cli_lock");
  const std::string ckpt = (d / "run.ckpt").string();
  {
    trident::PathLock other_run(ckpt, "--save");
    expect_refused_before_training(kTrain + " --save " + ckpt, "--save '" + ckpt + "' is in use");
  }
  EXPECT_EQ(run_trident(kTrain + " --epochs 1 --save " + ckpt, false).code, 0);
  EXPECT_TRUE(fs::is_regular_file(ckpt));
  fs::remove_all(d);
}
