// POSIX implementation of InputFile: open with O_NONBLOCK, fstat the descriptor (not the
// name, so nothing can be swapped in between), then clear O_NONBLOCK for ordinary reads.
#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace trident {

namespace {
const char* not_regular(mode_t mode) {
  if (S_ISDIR(mode)) return "it is a directory";
  if (S_ISFIFO(mode)) return "it is a FIFO (named pipe), not a regular file";
  if (S_ISSOCK(mode)) return "it is a socket, not a regular file";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "it is a device, not a regular file";
  return "it is not a regular file";
}
}  // namespace

InputFile::InputFile(const std::string& path, const std::string& kind) : path_(path), kind_(kind) {
  const std::string what = kind + " '" + path + "'";
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd_ < 0) {
    const int err = errno;
    throw Error("cannot open " + what + ": " + (err == ENOENT ? "file not found" : std::strerror(err)));
  }
  auto refuse = [&](const std::string& why) {
    ::close(fd_);
    fd_ = -1;
    return Error("cannot read " + what + ": " + why);
  };
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw refuse(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw refuse(not_regular(st.st_mode));
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) throw refuse(std::strerror(errno));
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(uint64_t offset, size_t n, void* dst) const {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw Error("cannot read " + kind_ + " '" + path_ + "': " +
                  (got < 0 ? std::string(std::strerror(errno)) : "the file shrank while being read"));
    p += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
}

std::string InputFile::read_all() const {
  std::string bytes(static_cast<size_t>(size_), '\0');
  read_at(0, bytes.size(), bytes.data());
  return bytes;
}

int InputFile::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

}  // namespace trident
