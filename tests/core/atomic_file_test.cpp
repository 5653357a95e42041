// Atomic writes that cannot be turned against the user: nothing planted under a predictable
// temporary name is followed, and a path that is not a regular file is never replaced.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "support/temp_dir.h"

using namespace trident;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) { return test_support::fresh_temp_dir("af_" + name); }

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// Writes "new" to `path` and returns the Error's message ("" when it succeeded).
std::string write_error(const fs::path& path) {
  try {
    write_file_atomically(path.string(), "new", 3);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(AtomicFile, ASymlinkAtThePredictableTemporaryNameIsNotFollowed) {
  const fs::path d = temp_dir("symlink");
  const fs::path victim = d / "victim", target = d / "out.bin";
  std::ofstream(victim) << "precious";
  const fs::path planted = target.string() + ".tmp." + std::to_string(::getpid());
  fs::create_symlink(victim, planted);
  EXPECT_EQ(write_error(target), "");
  EXPECT_EQ(slurp(target), "new");
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_TRUE(fs::is_symlink(planted));
  // Only the target, the victim and the planted link remain: no temporary is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), 3);
}

TEST(AtomicFile, AFifoADirectoryOrADeviceIsNeverReplaced) {
  const fs::path d = temp_dir("nodes");
  const fs::path fifo = d / "pipe", dir = d / "dir.npy", link = d / "link";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directory(dir);
  std::ofstream(d / "real") << "old";
  fs::create_symlink(d / "real", link);
  for (const auto& [path, word] : {std::pair{fifo, "FIFO"}, {dir, "directory"}, {link, "symbolic link"}}) {
    const std::string msg = write_error(path);
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(word), std::string::npos) << msg;
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(slurp(d / "real"), "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), 4);  // no temporaries
  // /dev/null: refused before anything is created (as root it would otherwise become a file).
  const std::string msg = write_error("/dev/null");
  EXPECT_NE(msg.find("device"), std::string::npos) << msg;
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST(AtomicFile, ARegularFileIsReplacedWhole) {
  const fs::path d = temp_dir("regular");
  std::ofstream(d / "f") << "older and longer";
  EXPECT_EQ(write_error(d / "f"), "");
  EXPECT_EQ(slurp(d / "f"), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), 1);
}

// check_writable finds at the start what a write would find at the end, and leaves nothing.
TEST(AtomicFile, CheckWritableRefusesWhatAWriteWouldRefuse) {
  const fs::path d = temp_dir("check_writable");
  EXPECT_NO_THROW(check_writable((d / "new.bin").string()));
  std::ofstream(d / "old.bin") << "old";
  EXPECT_NO_THROW(check_writable((d / "old.bin").string()));
  EXPECT_EQ(slurp(d / "old.bin"), "old");
  fs::create_directory(d / "dir.bin");
  ASSERT_EQ(::mkfifo((d / "fifo.bin").c_str(), 0600), 0);
  for (const auto& [name, why] : {std::pair{"dir.bin", "it is a directory"}, {"fifo.bin", "FIFO"},
                                  {"missing/x.bin", "creating a temporary file beside it failed"}}) {
    try {
      check_writable((d / name).string());
      ADD_FAILURE() << name << " passed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  // old.bin, dir.bin, fifo.bin: no temporary left
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), 3);
  fs::remove_all(d);
}
