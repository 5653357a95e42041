// Temporaries killed runs leave beside a target are removed when the target is next written,
// and nothing else is: not a live writer's (locked, or recent), not a link (nor its target),
// not a directory, not another user's file, not a name that only resembles the pattern.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/stale_temporaries.h"
#include "support/temp_dir.h"

using namespace trident;
namespace fs = std::filesystem;

namespace {

const std::string kSuffix = "0123456789abcdef";

fs::path make_file(const fs::path& p, bool old) {
  std::ofstream(p) << "partial checkpoint";
  if (old) fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::hours(1));
  return p;
}

}  // namespace

TEST(StaleTemporaries, ADeadWritersTemporaryIsRemovedWhenTheTargetIsWritten) {
  const fs::path d = test_support::fresh_temp_dir("stale_tmp");
  const std::string target = (d / "run.ckpt").string();
  const fs::path dead = make_file(temporary_name(target, kSuffix), true);
  const fs::path other_dead = make_file(temporary_name(target, "fedcba9876543210"), true);
  write_file_atomically(target, "new", 3);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(other_dead));
  EXPECT_TRUE(fs::is_regular_file(target));
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator{}), 1);
  fs::remove_all(d);
}

TEST(StaleTemporaries, EverythingElseIsLeftAlone) {
  const fs::path d = test_support::fresh_temp_dir("stale_tmp_kept");
  const std::string target = (d / "run.ckpt").string();
  std::vector<fs::path> kept;
  kept.push_back(make_file(temporary_name(target, "aaaaaaaaaaaaaaaa"), false));   // recent: a live writer
  kept.push_back(make_file(temporary_name(target, "0123456789ABCDEF"), true));    // not the exact pattern
  kept.push_back(make_file(temporary_name(target, "0123456789abcde"), true));     // 15 digits
  kept.push_back(make_file(temporary_name(target, kSuffix + "0"), true));         // 17 digits
  kept.push_back(make_file(temporary_name((d / "other.ckpt").string(), kSuffix), true));  // another target
  const fs::path victim = make_file(d / "victim", true);
  const fs::path link = temporary_name(target, "bbbbbbbbbbbbbbbb");
  fs::create_symlink(victim, link);
  kept.push_back(link);
  kept.push_back(temporary_name(target, "cccccccccccccccc"));
  fs::create_directory(kept.back());
  // A writer that is alive holds its temporary's lock, however old the file looks.
  const fs::path locked = make_file(temporary_name(target, "dddddddddddddddd"), true);
  const int fd = ::open(locked.c_str(), O_RDONLY);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  kept.push_back(locked);
  if (::geteuid() == 0) {  // another user's file (only root can make one here)
    kept.push_back(make_file(temporary_name(target, "eeeeeeeeeeeeeeee"), true));
    ASSERT_EQ(::chown(kept.back().c_str(), 65534, 65534), 0);
    fs::last_write_time(kept.back(), fs::file_time_type::clock::now() - std::chrono::hours(1));
  }
  EXPECT_EQ(remove_stale_temporaries(target), 0);
  for (const fs::path& p : kept) EXPECT_TRUE(fs::exists(fs::symlink_status(p))) << p;
  EXPECT_TRUE(fs::is_regular_file(victim));
  ::close(fd);
  EXPECT_EQ(remove_stale_temporaries(target), 1);  // the lock is gone: that one was stale
  EXPECT_FALSE(fs::exists(locked));
  fs::remove_all(d);
}
