// Opening the files trident reads (models, weights, checkpoints, inputs, datasets): only a
// regular file is read, so a FIFO, a device or a directory gets one sentence instead of a read
// that blocks for ever or a size that means nothing. Every reader opens through here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace trident {

class InputFile {
 public:
  // Opens `path` read-only without blocking (a FIFO with no writer would block open itself),
  // then refuses anything but a regular file. `kind` names the file in messages, e.g.
  // "ONNX model". Throws trident::Error naming the path.
  InputFile(const std::string& path, const std::string& kind);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  uint64_t size() const { return size_; }
  // Reads exactly `n` bytes at `offset`; a file that shrank meanwhile is an Error.
  void read_at(uint64_t offset, size_t n, void* dst) const;
  // The whole file (its size when opened).
  std::string read_all() const;
  // Hands the descriptor to the caller, who closes it.
  int release();

 private:
  std::string path_, kind_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace trident
