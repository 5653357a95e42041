// Fuzz support: readers that take a path (checkpoints, IDX datasets) get each input as an
// in-memory file (memfd) opened through /proc/self/fd, so a run touches no disk and the
// reader's own open, regular-file check and gzip back end run exactly as for a user's file.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <string>

namespace trident::fuzz {

class MemoryFile {
 public:
  MemoryFile() : fd_(::memfd_create("trident-fuzz-input", MFD_CLOEXEC)) {
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  // Replaces the file's contents with `size` bytes and returns a path that opens it.
  const std::string& hold(const void* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    const char* p = static_cast<const char*>(data);
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::pwrite(fd_, p + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace trident::fuzz
