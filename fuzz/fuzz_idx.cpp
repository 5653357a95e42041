// libFuzzer target for the IDX dataset reader (MNIST-style images and labels, plain or gzip).
// The first byte picks the case: bit 0 gzip-compresses the rest before it is read (so header
// mutations also reach the reader through zlib; a raw 1f 8b prefix tests corrupt streams),
// bit 1 reads labels instead of images, the high bits set num_classes. Seeds: corpus/idx.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "memory_file.h"
#include "runtime/data/idx.h"
#include "support/gzip_bytes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trident::data;
  if (size == 0) return 0;
  static trident::fuzz::MemoryFile file;
  const uint8_t mode = data[0];
  std::vector<uint8_t> bytes(data + 1, data + size);
  if (mode & 1) bytes = trident::test_support::gzip_bytes(bytes);
  const std::string& path = file.hold(bytes.data(), bytes.size());
  try {
    if (mode & 2) {
      const int num_classes = 1 + (mode >> 2) * 4;  // 1 .. 253
      const IdxLabels l = read_idx_labels(path, num_classes);
      if (static_cast<int64_t>(l.labels.size()) != l.count) std::abort();
      for (uint8_t v : l.labels)
        if (v >= num_classes) std::abort();
    } else {
      const IdxImages im = read_idx_images(path);
      if (static_cast<int64_t>(im.pixels.size()) != im.count * im.height * im.width) std::abort();
    }
  } catch (const trident::Error&) {
    // A clean rejection is a correct outcome.
  }
  return 0;
}
