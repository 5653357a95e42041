// The advisory lock on a path a run keeps writing: a second holder is refused with a sentence
// (two runs saving one checkpoint overwrote each other silently), the lock ends with its
// holder, and the lock file is never a symbolic link or anything but a regular file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "core/path_lock.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

using namespace trident;
using test_support::error_of;
namespace fs = std::filesystem;

TEST(PathLock, ASecondHolderIsRefusedUntilTheFirstEnds) {
  const fs::path d = test_support::fresh_temp_dir("path_lock");
  const std::string ckpt = (d / "run.ckpt").string();
  {
    PathLock first(ckpt, "--save");
    EXPECT_TRUE(fs::is_regular_file(PathLock::lock_path(ckpt)));
    EXPECT_EQ(error_of([&] { PathLock second(ckpt, "--save"); }),
              "--save '" + ckpt + "' is in use: another run holds its lock file '" + ckpt +
                  ".lock'; save this run elsewhere or wait for that one to end");
  }
  EXPECT_EQ(error_of([&] { PathLock again(ckpt, "--save"); }), "");
  fs::remove_all(d);
}

TEST(PathLock, TheLockFileIsNeverALinkOrASpecialFile) {
  const fs::path d = test_support::fresh_temp_dir("path_lock_special");
  const std::string linked = (d / "a.ckpt").string(), dir = (d / "b.ckpt").string();
  fs::create_symlink(d / "elsewhere", PathLock::lock_path(linked));
  EXPECT_NE(error_of([&] { PathLock l(linked, "--save"); }).find("it is a symbolic link"), std::string::npos);
  EXPECT_FALSE(fs::exists(d / "elsewhere"));
  fs::create_directory(PathLock::lock_path(dir));
  EXPECT_NE(error_of([&] { PathLock l(dir, "--save"); }).find("--save '" + dir + "'"), std::string::npos);
  fs::remove_all(d);
}
