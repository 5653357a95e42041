// --max-memory through the real binary: train, infer and bench refuse a plan that does not fit
// with one sentence naming the size and the flag to lower, before anything large is allocated
// (infer --batch 65536 grew to 22.9 GB and was killed by the OOM killer); bad sizes are refused.
// Inputs and datasets obey the same limits: an input's batch the --batch range, a dataset
// read under --train-limit only as far as the limit.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "runtime/data/idx.h"
#include "runtime/npy.h"
#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace {

using trident::test_support::RunResult;
using trident::test_support::run_trident;

void expect_one_sentence(const RunResult& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.code, 1) << r.output;
  for (const std::string& n : needles) EXPECT_NE(r.output.find(n), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

}  // namespace

TEST(MemoryLimitCli, InferRefusesAPlanLargerThanTheLimit) {
  expect_one_sentence(run_trident("infer --batch 65536 --max-memory 1G"),
                      {"the infer graph's buffers (arena", "more than the 1.0 GiB that --max-memory 1G allows",
                       "lower --batch"});
}

TEST(MemoryLimitCli, TrainAndBenchRefuseAPlanLargerThanTheLimit) {
  expect_one_sentence(run_trident("train --synthetic --train-limit 256 --test-limit 64 --batch 256 --max-memory 16M"),
                      {"the train graph's buffers", "--max-memory 16M", "lower --batch"});
  expect_one_sentence(run_trident("bench --model resnet50 --batch 512 --max-memory 2G"),
                      {"the train graph's buffers", "GiB", "lower --batch"});
}

TEST(MemoryLimitCli, AFittingLimitRuns) {
  const RunResult r = run_trident("infer --batch 8 --max-memory 512M --iterations 1 --warmup 0 --json", false);
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST(MemoryLimitCli, MalformedSizesAreRefused) {
  for (const char* bad : {"8X", "0", "-1G", "lots"}) {
    const RunResult r = run_trident(std::string("infer --max-memory ") + bad);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find("--max-memory: must be a size such as 512M"), std::string::npos) << r.output;
  }
}

// A .npy input's first dimension is the batch: 70,000 samples bypassed --batch's limit of 65536.
TEST(MemoryLimitCli, AnInputBatchOutsideTheBatchRangeIsRefused) {
  const std::filesystem::path dir = trident::test_support::fresh_temp_dir("input_batch");
  const std::string path = (dir / "many.npy").string();
  trident::runtime::write_npy(path, {{70000, 1}, trident::DType::f32, std::vector<std::byte>(70000 * 4)});
  expect_one_sentence(run_trident("infer --input " + path),
                      {"--input '" + path + "' holds a batch of 70000", "--batch's range", "65536"});
  std::filesystem::remove_all(dir);
}

namespace {
void write_gzip_idx(const std::filesystem::path& path, uint32_t magic, const std::vector<uint32_t>& dims,
                    size_t payload_bytes) {
  std::vector<uint8_t> bytes;
  auto be32 = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(v >> shift));
  };
  be32(magic);
  for (uint32_t d : dims) be32(d);
  bytes.resize(bytes.size() + payload_bytes, 0);
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
}
}  // namespace

// Headers declaring 1.37 M images over 600 present: --train-limit 512 reads 512 and trains
// (before, the whole claim was read first: 5.4 GB for a 1 MB file, or "truncated" here).
TEST(MemoryLimitCli, TrainLimitIsAppliedWhileReading) {
  namespace data = trident::data;
  const std::filesystem::path dir = trident::test_support::fresh_temp_dir("train_limit_read");
  for (const char* split : {"train", "t10k"}) {
    write_gzip_idx(dir / (std::string(split) + "-images-idx3-ubyte.gz"), data::kIdxImagesMagic, {1370000, 28, 28},
                   600 * 28 * 28);
    write_gzip_idx(dir / (std::string(split) + "-labels-idx1-ubyte.gz"), data::kIdxLabelsMagic, {1370000}, 600);
  }
  const RunResult ok = run_trident("train --data " + dir.string() +
                                   " --train-limit 512 --test-limit 64 --epochs 1 --batch 64 --backend cpu_ref");
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_NE(ok.output.find("512 images"), std::string::npos) << ok.output;
  expect_one_sentence(run_trident("train --data " + dir.string() + " --train-limit 1000000 --max-memory 1G"),
                      {"the 1000000 images of", "more than the 1.0 GiB", "use --train-limit"});
  std::filesystem::remove_all(dir);
}
