// POSIX implementation of the atomic write: open/write/fsync the temporary file, rename it
// over the target, then fsync the directory so the rename itself survives a crash.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace trident {

void write_file_atomically(const std::string& path, const void* data, size_t size) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    return Error("cannot write '" + path + "': " + what + " failed (" + std::strerror(err) + ")");
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw Error("cannot write '" + path + "': creating '" + tmp + "' failed (" + std::strerror(err) + ")");
  }
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
