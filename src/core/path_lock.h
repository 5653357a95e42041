// An advisory lock on a path that a run keeps writing (a checkpoint saved every epoch): an
// exclusive flock on "<path>.lock" beside it, so a second run saving to the same path refuses
// with a sentence instead of the two overwriting each other. The lock file stays (removing it
// would let a third run lock a new file while the first still holds the old one).
#pragma once
#include <string>

namespace trident {

class PathLock {
 public:
  // Locks "<path>.lock", creating it if needed (never through a symbolic link, and only a
  // regular file is used); `what` names the path in messages, e.g. "--save". Throws
  // trident::Error when another process holds the lock or the file cannot be made.
  PathLock(const std::string& path, const std::string& what);
  ~PathLock();
  PathLock(const PathLock&) = delete;
  PathLock& operator=(const PathLock&) = delete;

  static std::string lock_path(const std::string& path) { return path + ".lock"; }

 private:
  int fd_ = -1;
};

}  // namespace trident
