// What a hostile user can hand `trident train` and `trident infer` beyond the files themselves:
// more decode workers than the memory budget holds, a metrics file or IR dump at a planted link
// or a FIFO, a checkpoint whose checksum entries were removed or renamed, weights of NaN, a
// weights file with no tensor, a valid PNG whose evaluation resize would overflow. Each is one
// sentence and a non-zero exit, or a notice, or a skipped and counted image — never a hang, a
// write through a link, or damaged data loaded.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/checkpoint/safetensors.h"
#include "runtime/data/image_codec.h"
#include "support/image_folder.h"
#include "support/run_binary.h"
#include "support/temp_dir.h"

namespace trident {
namespace {

namespace fs = std::filesystem;
using test_support::run_trident;

const std::string kSmall = "train --synthetic --train-limit 64 --test-limit 32 --batch 32 --threads 1 --device cpu_ref";

std::string file_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The safetensors file at `p` with its metadata changed by `edit` (the header rewritten, the data kept).
void edit_metadata(const fs::path& p, const std::function<void(nlohmann::json&)>& edit) {
  const std::string bytes = file_text(p);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  edit(header["__metadata__"]);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t len = text.size();
  for (int i = 0; i < 8; ++i, len >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(len & 0xff);
  out += text + bytes.substr(8 + n);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << out;
}

TEST(HostileCli, MoreWorkersThanTheBudgetHoldsAreRefusedBeforeAllocating) {
  const fs::path d = test_support::fresh_temp_dir("hostile_workers");
  test_support::write_class_images(d, "train", 2, 4, 20, 20);
  test_support::write_class_images(d, "val", 2, 2, 20, 20);
  const auto r = run_trident("train --model fmnist_cnn --image-size 16 --batch 4 --threads 1 --workers 64 "
                             "--max-memory 1G --epochs 1 --data " + d.string());
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("64 workers' decodes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lower --workers"), std::string::npos) << r.output;
  fs::remove_all(d);
}

TEST(HostileCli, OutputFilesAreNeverWrittenThroughALinkOrIntoAFifo) {
  const fs::path d = test_support::fresh_temp_dir("hostile_outputs");
  const fs::path target = d / "victim.txt";
  std::ofstream(target) << "keep me";
  fs::create_symlink(target, d / "metrics.jsonl");
  const auto linked = run_trident(kSmall + " --epochs 1 --log " + (d / "metrics.jsonl").string());
  EXPECT_EQ(linked.code, 1) << linked.output;
  EXPECT_NE(linked.output.find("symbolic link"), std::string::npos) << linked.output;
  ASSERT_EQ(::mkfifo((d / "fifo.jsonl").c_str(), 0600), 0);
  const auto fifo = run_trident(kSmall + " --epochs 1 --log " + (d / "fifo.jsonl").string());
  EXPECT_EQ(fifo.code, 1) << fifo.output;
  EXPECT_NE(fifo.output.find("FIFO"), std::string::npos) << fifo.output;
  fs::create_directories(d / "dump" / "train");
  fs::create_symlink(target, d / "dump" / "train" / "00_input.txt");
  const auto dumped = run_trident(kSmall + " --epochs 1 --dump-ir " + (d / "dump").string());
  EXPECT_EQ(dumped.code, 1) << dumped.output;
  EXPECT_NE(dumped.output.find("cannot write the IR dump"), std::string::npos) << dumped.output;
  EXPECT_EQ(file_text(target), "keep me");
  fs::remove_all(d);
}

TEST(HostileCli, ACheckpointWithoutItsChecksumsIsDamaged) {
  const fs::path d = test_support::fresh_temp_dir("hostile_crc");
  const fs::path ckpt = d / "run.ckpt";
  ASSERT_EQ(run_trident(kSmall + " --epochs 1 --save " + ckpt.string()).code, 0);
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* words;
  };
  const Case cases[] = {
      {"data checksum removed", [](nlohmann::json& m) { m.erase(runtime::kDataChecksumKey); }, "lacks the checksum"},
      {"data checksum renamed",
       [](nlohmann::json& m) {
         m["data_crc32"] = m[runtime::kDataChecksumKey];
         m.erase(runtime::kDataChecksumKey);
       },
       "lacks the checksum"},
      {"both removed",
       [](nlohmann::json& m) {
         m.erase(runtime::kDataChecksumKey);
         m.erase(runtime::kHeaderChecksumKey);
       },
       "lacks the checksum"},
      {"a setting changed", [](nlohmann::json& m) { m["lr"] = "0.5"; }, "its header has CRC-32C"},
  };
  for (const Case& c : cases) {
    const fs::path copy = d / "copy.ckpt";
    fs::copy_file(ckpt, copy, fs::copy_options::overwrite_existing);
    edit_metadata(copy, c.edit);
    const auto r = run_trident(kSmall + " --epochs 2 --resume " + copy.string());
    EXPECT_EQ(r.code, 1) << c.what << ": " << r.output;
    EXPECT_NE(r.output.find(c.words), std::string::npos) << c.what << ": " << r.output;
  }
  fs::remove_all(d);
}

TEST(HostileCli, NonFiniteAndEmptyWeights) {
  const fs::path d = test_support::fresh_temp_dir("hostile_weights");
  const fs::path good = d / "good.safetensors";
  ASSERT_EQ(run_trident("export --output " + good.string() + " --format torch").code, 0);
  runtime::Metadata md;
  runtime::WeightMap w = runtime::read_safetensors(good.string(), &md);
  float* first = reinterpret_cast<float*>(w.at("fc.bias").data.data());
  first[0] = std::nanf("");
  runtime::write_safetensors((d / "nan.safetensors").string(), w, md);
  const auto inferred = run_trident("infer --weights " + (d / "nan.safetensors").string() + " --iterations 1 --warmup 0");
  EXPECT_EQ(inferred.code, 0) << inferred.output;
  EXPECT_NE(inferred.output.find("notice: --weights '" + (d / "nan.safetensors").string() +
                                 "' holds NaN or infinite values (in 'fc.bias')"),
            std::string::npos)
      << inferred.output;
  const auto trained = run_trident(kSmall + " --model fmnist_cnn --epochs 1 --weights " + (d / "nan.safetensors").string());
  EXPECT_EQ(trained.code, 1) << trained.output;
  EXPECT_NE(trained.output.find("training from them can only give NaN"), std::string::npos) << trained.output;
  runtime::write_safetensors((d / "empty.safetensors").string(), {}, {});
  for (const std::string& cmd : {std::string("infer --iterations 1 --warmup 0"), kSmall + " --epochs 1"}) {
    const auto r = run_trident(cmd + " --weights " + (d / "empty.safetensors").string());
    EXPECT_EQ(r.code, 1) << cmd << ": " << r.output;
    EXPECT_NE(r.output.find("holds no tensor this network uses"), std::string::npos) << cmd << ": " << r.output;
  }
  fs::remove_all(d);
}

TEST(HostileCli, AValidPngThatCannotBeEvaluatedIsSkippedAndCounted) {
  const fs::path d = test_support::fresh_temp_dir("hostile_png_line");
  test_support::write_class_images(d, "train", 2, 4, 20, 20);
  test_support::write_class_images(d, "val", 2, 2, 20, 20);
  const std::vector<uint8_t> line(size_t{3} << 24, 100);  // 2^24 x 1 pixels, a tiny PNG
  test_support::write_file(d / "val" / "class0" / "line.png", data::encode_png(line.data(), 1 << 24, 1, 3));
  const auto r = run_trident("train --model fmnist_cnn --image-size 16 --batch 4 --workers 1 --threads 1 --epochs 1 "
                             "--json --data " + d.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"skipped_images\":1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"event\":\"eval\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"images\":4,"), std::string::npos) << "the unreadable image is not scored: " << r.output;
  fs::remove_all(d);
}

}  // namespace
}  // namespace trident
