// PathLock on POSIX: open with O_CREAT|O_NOFOLLOW, fstat for a regular file, flock with
// LOCK_NB. flock belongs to the open file description, so the lock ends with the process,
// however it ends: a killed run never leaves a path locked.
#include "core/path_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace trident {

PathLock::PathLock(const std::string& path, const std::string& what) {
  const std::string lock = lock_path(path);
  const std::string who = what + " '" + path + "'";
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd_ < 0)
    throw Error(who + ": cannot create its lock file '" + lock + "' (" +
                (errno == ELOOP ? std::string("it is a symbolic link") : std::strerror(errno)) + ")");
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw Error(who + ": its lock file '" + lock + "' is not a regular file");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw Error(who + " is in use: another run holds its lock file '" + lock +
                  "'; save this run elsewhere or wait for that one to end");
    throw Error(who + ": cannot lock '" + lock + "' (" + std::strerror(err) + ")");
  }
}

PathLock::~PathLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace trident
