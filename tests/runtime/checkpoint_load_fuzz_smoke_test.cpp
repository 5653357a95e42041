// Bounded smoke run of fuzz/fuzz_checkpoint.cpp in the regular suite: 1500 seeded mutations of
// real training checkpoints, half aimed at the header and its metadata, go through
// load_checkpoint (what --resume reads); each must load with in-range settings or be refused.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>

#include "core/error.h"
#include "frontend/zoo.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/train_limits.h"
#include "support/mutate.h"
#include "support/temp_dir.h"

using namespace trident;
using namespace trident::runtime;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Checkpoints of the default model before training and after one epoch of 4 steps.
std::vector<std::string> seeds(const std::filesystem::path& dir) {
  TrainConfig c;
  c.compile.backend = "cpu_ref";
  c.epochs = 3;
  const Trainer t(frontend::build_model("fmnist_cnn", {32}), c);
  std::vector<std::string> v;
  for (int64_t epoch : {0, 1}) {
    CheckpointInfo i = checkpoint_info(t);
    i.model = "fmnist_cnn";
    i.epoch = epoch;
    i.step = 4 * epoch;
    i.dataset = "synthetic";
    i.train_images = 128;
    const std::string path = (dir / ("seed" + std::to_string(epoch))).string();
    save_checkpoint(path, t, i);
    v.push_back(read_file(path));
  }
  return v;
}

}  // namespace

TEST(CheckpointLoadFuzzSmoke, MutatedCheckpointsAreLoadedOrRefused) {
  const auto dir = test_support::fresh_temp_dir("ckpt_fuzz");
  const auto base = seeds(dir);
  const std::string path = (dir / "mutant").string();
  std::mt19937_64 rng(20261201);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string b = base[i % base.size()];
    uint64_t header = 0;
    for (int k = 7; k >= 0; --k) header = header << 8 | static_cast<uint8_t>(b[k]);
    test_support::mutate(b, rng, 8 + header);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << b;
    try {
      const Checkpoint ck = load_checkpoint(path);
      const CheckpointInfo& in = ck.info;
      EXPECT_TRUE(kEpochsLimit.allows(static_cast<double>(in.config.epochs)) &&
                  kBatchLimit.allows(static_cast<double>(in.batch)) && kLrLimit.allows(in.config.lr) &&
                  kMomentumLimit.allows(in.config.compile.momentum) &&
                  kWeightDecayLimit.allows(in.config.compile.weight_decay) &&
                  kWarmupLimit.allows(in.config.warmup_epochs))
          << "mutation " << i << " loaded out-of-range settings";
      EXPECT_TRUE(in.epoch >= 0 && in.epoch <= in.config.epochs && in.step >= 0) << "mutation " << i;
      ++accepted;
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 500);
  EXPECT_GT(accepted, 0);
}
