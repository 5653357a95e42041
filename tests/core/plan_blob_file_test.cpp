// The serialized-plan files (core/plan_blob_file.h) on the fuzz target's seed: a blob of this
// machine and key gives its payload, written and read back the same; a damaged one (another
// checksum, cut short, a bad size line, another header) gives none and one sentence; another
// machine's or key's gives none and no problem; a FIFO or directory in its place is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/plan_blob_file.h"
#include "support/special_files.h"
#include "support/temp_dir.h"

namespace trident {
namespace {

const std::string kMachine = "onednn 3.0.0; isa 1; cpu fuzz";
const std::string kKey = "conv|fuzz";

std::string seed() {
  std::ifstream in("fuzz/corpus/plan_cache/blob.plan", std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(PlanBlobFile, TheSeedGivesItsPayloadAndWritesBackTheSame) {
  const std::string file = seed();
  std::string problem;
  const std::optional<std::string> payload = parse_plan_blob(file, kMachine, kKey, problem);
  ASSERT_TRUE(payload) << problem;
  EXPECT_EQ(problem, "");
  EXPECT_EQ(*payload, std::string("1\tplan fuzz\n\x00\x01ubjson", 20));
  EXPECT_EQ(format_plan_blob(kMachine, kKey, *payload), file);
}

TEST(PlanBlobFile, ADamagedBlobGivesNothingAndOneSentence) {
  const std::string file = seed();
  std::string problem;
  std::string flipped = file;
  flipped.back() ^= 1;
  EXPECT_FALSE(parse_plan_blob(flipped, kMachine, kKey, problem));
  EXPECT_EQ(problem, "its payload does not match its checksum");
  EXPECT_FALSE(parse_plan_blob(file.substr(0, file.size() - 3), kMachine, kKey, problem));
  EXPECT_EQ(problem, "it holds 17 payload bytes where its header says 20");
  EXPECT_FALSE(parse_plan_blob(file + "x", kMachine, kKey, problem));
  EXPECT_EQ(problem, "it holds 21 payload bytes where its header says 20");
  std::string bad_size = file;
  bad_size.replace(bad_size.find("bytes: 20"), 9, "bytes: -1");
  EXPECT_FALSE(parse_plan_blob(bad_size, kMachine, kKey, problem));
  EXPECT_EQ(problem, "its size line is not \"bytes: <n> crc32c: <8 hex digits>\"");
  EXPECT_FALSE(parse_plan_blob("trident plan blob 2\n" + file.substr(20), kMachine, kKey, problem));
  EXPECT_EQ(problem, "it does not start with \"trident plan blob 1\"");
  EXPECT_FALSE(parse_plan_blob("trident plan blob 1\nmachine: x\n", kMachine, kKey, problem));
  EXPECT_EQ(problem, "its header is cut short");
}

TEST(PlanBlobFile, AnotherMachinesOrKeysBlobIsNoProblem) {
  std::string problem = "stale";
  EXPECT_FALSE(parse_plan_blob(seed(), "another machine", kKey, problem));
  EXPECT_EQ(problem, "");
  EXPECT_FALSE(parse_plan_blob(seed(), kMachine, "conv|other", problem));
  EXPECT_EQ(problem, "");
}

TEST(PlanBlobFile, WhatCannotBeOneLineIsNotWritten) {
  EXPECT_EQ(format_plan_blob("two\nlines", kKey, "p"), "");
  EXPECT_EQ(format_plan_blob(kMachine, "", "p"), "");
  EXPECT_NE(format_plan_blob(kMachine, kKey, ""), "");
}

TEST(PlanBlobFile, FilesAreWrittenReadAndRefusedThroughTheCheckedOpener) {
  const std::filesystem::path dir = test_support::fresh_temp_dir("plan_blob");
  const std::string path = plan_blob_path(dir.string(), "cuda", kMachine, kKey);
  EXPECT_NE(path.find(".blobs/"), std::string::npos) << path;
  std::string problem;
  EXPECT_FALSE(read_plan_blob(path, kMachine, kKey, problem));  // absent: nothing built yet
  EXPECT_EQ(problem, "");
  ASSERT_TRUE(write_plan_blob(path, kMachine, kKey, std::string("plan\0bytes", 10)));
  const std::optional<std::string> back = read_plan_blob(path, kMachine, kKey, problem);
  ASSERT_TRUE(back) << problem;
  EXPECT_EQ(*back, std::string("plan\0bytes", 10));

  test_support::SpecialFiles special("plan_blob", "fifo.plan", "dir.plan");
  EXPECT_FALSE(read_plan_blob(special.fifo.string(), kMachine, kKey, problem));
  EXPECT_NE(problem.find(special.fifo.string()), std::string::npos) << problem;
  EXPECT_FALSE(read_plan_blob(special.directory.string(), kMachine, kKey, problem));
  EXPECT_NE(problem.find(special.directory.string()), std::string::npos) << problem;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trident
