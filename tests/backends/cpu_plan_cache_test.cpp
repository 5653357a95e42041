// The cpu backend's plan cache (backends/cpu/plan_cache.h) on hostile files: a choice stored
// comes back, in a file named for this machine, and a first read of a file written for it
// finds its choices; a
// file that is not a plan cache (another machine's, a bad line, one over the size cap, a FIFO
// in its place) is not used — one sentence on stderr, no hang, no error — and the next choice
// rewrites it; keys or notes with a tab or a line break are not stored.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "backends/cpu/plan_cache.h"

namespace trident::cpu {
namespace {

std::filesystem::path fresh_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("trident_plan_cache_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

std::filesystem::path file(const std::filesystem::path& dir) { return plan_cache_path(dir.string()); }

std::string header() { return "trident cpu plans 1\nmachine: " + plan_cache_machine() + "\n"; }

// The sentence a first read of `dir`'s unusable cache prints, and that nothing is found.
std::string refused_read(const std::filesystem::path& dir) {
  testing::internal::CaptureStderr();
  EXPECT_FALSE(cached_choice(dir.string(), "key").has_value());
  return testing::internal::GetCapturedStderr();
}

TEST(CpuPlanCache, AStoredChoiceComesBackAndAFileOfThisMachineIsRead) {
  const auto dir = fresh_dir("round_trip");
  EXPECT_FALSE(cached_choice(dir.string(), "conv|a").has_value());
  store_choice(dir.string(), "conv|a", {1, "direct (jit), timed 0.5 ms"});
  const auto back = cached_choice(dir.string(), "conv|a");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->index, 1);
  EXPECT_EQ(back->note, "direct (jit), timed 0.5 ms");

  const auto other = fresh_dir("written_by_hand");
  write(file(other), header() + "conv|b\t2\twinograd (jit), timed 0.2 ms\n");
  const auto read = cached_choice(other.string(), "conv|b");
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->index, 2);
  EXPECT_FALSE(cached_choice(other.string(), "conv|c").has_value());
}

TEST(CpuPlanCache, AnotherMachinesFileIsNotUsedAndIsRewritten) {
  const auto dir = fresh_dir("foreign");
  write(file(dir), "trident cpu plans 1\nmachine: onednn 0.0.0; isa 0; cpu elsewhere\nkey\t1\tnote\n");
  EXPECT_NE(refused_read(dir).find("is not used: it was timed on another machine or library"), std::string::npos);
  store_choice(dir.string(), "mine", {0, "direct (brg), timed 1 ms"});
  std::ifstream in(file(dir));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, header() + "mine\t0\tdirect (brg), timed 1 ms\n");
}

TEST(CpuPlanCache, BadLinesAndOversizedFilesAreNotUsed) {
  const auto bad_index = fresh_dir("bad_index");
  write(file(bad_index), header() + "key\t999\tnote\n");
  EXPECT_NE(refused_read(bad_index).find("line 3 is not 'key TAB index TAB note'"), std::string::npos);

  const auto no_tabs = fresh_dir("no_tabs");
  write(file(no_tabs), header() + "just words\n");
  EXPECT_NE(refused_read(no_tabs).find("line 3"), std::string::npos);

  const auto garbage = fresh_dir("garbage");
  write(file(garbage), std::string("\x7f" "ELF\0\0binary", 12));
  EXPECT_NE(refused_read(garbage).find("does not start with the line 'trident cpu plans 1'"), std::string::npos);

  const auto huge = fresh_dir("huge");
  write(file(huge), header());
  std::filesystem::resize_file(file(huge), (uint64_t{16} << 20) + 1);  // sparse: costs no disk
  EXPECT_NE(refused_read(huge).find("larger than a plan cache grows"), std::string::npos);
}

TEST(CpuPlanCache, AFifoInPlaceOfTheFileNeitherHangsNorFails) {
  const auto dir = fresh_dir("fifo");
  ASSERT_EQ(::mkfifo((file(dir)).c_str(), 0600), 0);
  EXPECT_NE(refused_read(dir).find("is not used"), std::string::npos);
  store_choice(dir.string(), "key", {0, "note"});  // cannot replace a FIFO safely: no error either
}

TEST(CpuPlanCache, KeysAndNotesThatWouldBreakALineAreNotStored) {
  const auto dir = fresh_dir("tabs");
  store_choice(dir.string(), "a\tb", {0, "note"});
  store_choice(dir.string(), "key", {0, "two\nlines"});
  store_choice(dir.string(), "", {0, "note"});
  EXPECT_FALSE(cached_choice(dir.string(), "a\tb").has_value());
  EXPECT_FALSE(cached_choice(dir.string(), "key").has_value());
  EXPECT_FALSE(std::filesystem::exists(file(dir)));
}

}  // namespace
}  // namespace trident::cpu
