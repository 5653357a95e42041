// The memory budget: --max-memory sizes, the available-memory probe on fake /proc and cgroup
// trees (v1 and v2, limits of ancestors included), and claims refused with one sentence that
// names both sizes, the limit and what to lower.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/memory_budget.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

using namespace trident;
using test_support::error_of;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

}  // namespace

TEST(MemoryBudget, SizesTakeBinarySuffixes) {
  EXPECT_EQ(parse_memory_size("512"), 512u);
  EXPECT_EQ(parse_memory_size("8G"), uint64_t{8} << 30);
  EXPECT_EQ(parse_memory_size("8g"), uint64_t{8} << 30);
  EXPECT_EQ(parse_memory_size("8GiB"), uint64_t{8} << 30);
  EXPECT_EQ(parse_memory_size("1.5M"), uint64_t{3} << 19);
  EXPECT_EQ(parse_memory_size("2T"), uint64_t{2} << 40);
  EXPECT_EQ(parse_memory_size("64KB"), uint64_t{64} << 10);
  for (const char* bad : {"", "0", "0.1", "G", "-1G", "8X", "8 G", "1e9", "nan", "2048P", "99999999999999999999"})
    EXPECT_FALSE(parse_memory_size(bad)) << bad;
}

TEST(MemoryBudget, FormatsSizesForMessages) {
  EXPECT_EQ(format_bytes(12), "12 bytes");
  EXPECT_EQ(format_bytes(uint64_t{3} << 19), "1.5 MiB");
  EXPECT_EQ(format_bytes(uint64_t{23} << 30), "23.0 GiB");
}

TEST(MemoryBudget, AvailableMemoryIsMemAvailableLoweredByTheCgroupLimit) {
  const fs::path root = test_support::fresh_temp_dir("memory_probe");
  write(root / "proc/meminfo", "MemTotal:       24684084 kB\nMemAvailable:    4194304 kB\n");
  std::optional<AvailableMemory> a = available_host_memory(root.string());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->bytes, uint64_t{4} << 30);
  EXPECT_NE(a->source.find("MemAvailable"), std::string::npos);

  // cgroup v2: a 3 GiB limit on an ancestor, 1.5 GiB used of which 0.5 GiB is reclaimable cache.
  write(root / "proc/self/cgroup", "0::/job/step\n");
  write(root / "sys/fs/cgroup/job/memory.max", std::to_string(uint64_t{3} << 30) + "\n");
  write(root / "sys/fs/cgroup/job/memory.current", std::to_string(uint64_t{3} << 29) + "\n");
  write(root / "sys/fs/cgroup/job/memory.stat", "anon 1\ninactive_file " + std::to_string(uint64_t{1} << 29) + "\n");
  write(root / "sys/fs/cgroup/job/step/memory.max", "max\n");
  a = available_host_memory(root.string());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->bytes, uint64_t{2} << 30);
  EXPECT_NE(a->source.find("cgroup"), std::string::npos);

  // cgroup v1, its limit read at the mount's root when the path is not visible there.
  write(root / "proc/self/cgroup", "4:memory:/not/mounted/here\n0::/\n");
  write(root / "sys/fs/cgroup/memory/memory.limit_in_bytes", std::to_string(uint64_t{1} << 30) + "\n");
  write(root / "sys/fs/cgroup/memory/memory.usage_in_bytes", std::to_string(uint64_t{1} << 28) + "\n");
  a = available_host_memory(root.string());
  ASSERT_TRUE(a);
  EXPECT_EQ(a->bytes, uint64_t{3} << 28);
  fs::remove_all(root);
}

TEST(MemoryBudget, ClaimsBeyondTheLimitAreOneSentence) {
  MemoryBudget b(uint64_t{1} << 30, "that --max-memory 1G allows", "lower --batch");
  b.claim(uint64_t{1} << 29, "the data");
  EXPECT_EQ(b.headroom(), uint64_t{1} << 29);
  const std::string msg = error_of([&] { b.claim(uint64_t{3} << 29, "the train graph's buffers"); });
  EXPECT_EQ(msg,
            "the train graph's buffers would take 1.5 GiB on top of the 512.0 MiB already in use, more than "
            "the 1.0 GiB that --max-memory 1G allows; lower --batch");
  EXPECT_EQ(b.claimed(), uint64_t{1} << 29);  // a refused claim is not counted
  EXPECT_NE(error_of([&] { b.check(uint64_t{1} << 30, "x", "use --train-limit"); }).find("use --train-limit"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.check_device(10 << 20, 1 << 20, "the buffers"); }).find("of GPU memory"),
            std::string::npos);
  MemoryBudget unlimited;
  unlimited.claim(uint64_t{1} << 62, "anything");
  EXPECT_EQ(unlimited.headroom(), UINT64_MAX);
}
