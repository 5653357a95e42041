// POSIX implementation of the atomic write: create a temporary file beside the target under a
// random name with O_CREAT|O_EXCL|O_NOFOLLOW (so nothing planted in a shared directory is ever
// followed or reused), write and fsync it, rename it over the target, then fsync the directory
// so the rename itself survives a crash. Only a regular file (or nothing) is ever replaced.
// Before writing, the stale temporaries killed writers left beside the target are removed.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "core/stale_temporaries.h"

namespace trident {

namespace {

// Why an existing `path` may not be replaced, or nullptr when it is absent or a regular file.
const char* not_replaceable(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return nullptr;
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (S_ISFIFO(st.st_mode)) return "it is a FIFO (named pipe)";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "it is a device";
  return "it is not a regular file";
}

// Creates `<path>.tmp.<random>` exclusively and locks it (core/stale_temporaries.h: the lock
// tells a live writer's temporary from a dead one's); returns its descriptor and sets `tmp`.
int create_temporary(const std::string& path, std::string& tmp) {
  std::random_device rd;
  int err = EEXIST;
  for (int attempt = 0; attempt < 64 && err == EEXIST; ++attempt) {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%08x%08x", rd(), rd());
    tmp = temporary_name(path, suffix);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::flock(fd, LOCK_EX | LOCK_NB);  // nobody else can hold it yet
      return fd;
    }
    err = errno;
  }
  throw Error("cannot write '" + path + "': creating a temporary file beside it failed (" + std::strerror(err) + ")");
}

void refuse_unreplaceable(const std::string& path) {
  if (const char* why = not_replaceable(path))
    throw Error("cannot write '" + path + "': " + why + "; trident only replaces regular files");
}

}  // namespace

void check_writable(const std::string& path) {
  refuse_unreplaceable(path);
  std::string tmp;
  ::close(create_temporary(path, tmp));
  ::unlink(tmp.c_str());
}

void write_file_atomically(const std::string& path, const void* data, size_t size) {
  refuse_unreplaceable(path);
  remove_stale_temporaries(path);
  std::string tmp;
  const int fd = create_temporary(path, tmp);
  auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    return Error("cannot write '" + path + "': " + what + " failed (" + std::strerror(err) + ")");
  };
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      throw fail("writing", err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    throw fail("flushing to disk", err);
  }
  if (::close(fd) != 0) throw fail("closing", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw fail("renaming the temporary file", errno);
  // Make the rename durable; a failure here cannot damage either file, so it is ignored.
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace trident
