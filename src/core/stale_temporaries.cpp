// Finding and removing stale temporaries without trusting the directory: lstat (never follow),
// open with O_NOFOLLOW and compare the inode, take the writer's lock, compare once more, then
// unlink the name.
#include "core/stale_temporaries.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>

namespace trident {

namespace {

bool is_temporary_suffix(const std::string& s) {
  return s.size() == 16 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Whether `path` (an entry named like a temporary) is one a dead writer left; removes it if so.
bool remove_if_stale(const std::string& path) {
  struct stat seen {};
  if (::lstat(path.c_str(), &seen) != 0 || !S_ISREG(seen.st_mode) || seen.st_uid != ::geteuid() ||
      seen.st_nlink != 1 || ::time(nullptr) - seen.st_mtime < kStaleTemporaryAge.count())
    return false;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat opened {}, again {};
  bool removed = false;
  if (::fstat(fd, &opened) == 0 && same_file(seen, opened) && ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
      ::lstat(path.c_str(), &again) == 0 && same_file(seen, again))
    removed = ::unlink(path.c_str()) == 0;
  ::close(fd);
  return removed;
}

}  // namespace

int remove_stale_temporaries(const std::string& target) {
  const std::filesystem::path t(target);
  const std::string dir = t.parent_path().empty() ? "." : t.parent_path().string();
  const std::string prefix = temporary_name(t.filename().string(), "");
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
        !is_temporary_suffix(name.substr(prefix.size())))
      continue;
    removed += remove_if_stale((std::filesystem::path(dir) / name).string()) ? 1 : 0;
  }
  ::closedir(d);
  return removed;
}

}  // namespace trident
