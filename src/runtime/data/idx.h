// Reader for IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or plain.
// Everything in a file is untrusted: the header is checked against sanity limits and the actual
// data before any large allocation, and every fault becomes a one-sentence trident::Error.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace trident::data {

// IDX magic numbers: two zero bytes, the element type code (0x08 = unsigned byte), the rank.
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;

// Sanity limits on what a header may claim; larger files are rejected as absurd.
inline constexpr int64_t kIdxMaxCount = int64_t{1} << 28;         // samples per file
inline constexpr int64_t kIdxMaxSide = int64_t{1} << 14;          // image height / width
inline constexpr int64_t kIdxMaxPayloadBytes = int64_t{1} << 30;  // decoded data (1 GiB)

// What a reader takes from a file: at most `max_count` records (0: every record the header
// declares; with fewer, the rest of the file is neither read nor checked), and
// `before_payload`, called with the records about to be read and their bytes before anything
// is allocated for them (a memory budget claims them there; it may throw).
struct IdxReadLimits {
  int64_t max_count = 0;
  std::function<void(int64_t count, int64_t bytes)> before_payload;
};

// 3-D uint8 IDX: count images of height x width, row-major, one byte per pixel.
struct IdxImages {
  int64_t declared_count = 0;  // what the header says; count is what was read
  int64_t count = 0;
  int height = 0;
  int width = 0;
  std::vector<uint8_t> pixels;  // count * height * width bytes
};

// 1-D uint8 IDX: one class index per sample.
struct IdxLabels {
  int64_t declared_count = 0;
  int64_t count = 0;
  std::vector<uint8_t> labels;
};

// True when the file starts with the gzip magic bytes 1f 8b (how compression is detected; the
// name does not matter). Throws trident::Error when the file cannot be opened.
bool is_gzip_file(const std::string& path);

// Reads an image file (magic 0x00000803). Throws trident::Error naming the file when it is
// missing or unreadable, not IDX, not uint8 3-D, has zero or absurd dimensions, is truncated,
// has bytes after the declared data, or its gzip stream is corrupt.
IdxImages read_idx_images(const std::string& path, const IdxReadLimits& limits = {});

// Reads a label file (magic 0x00000801) and checks each label is in [0, num_classes)
// (1 <= num_classes <= 256); the Error for a bad label names its index. Other checks as above.
IdxLabels read_idx_labels(const std::string& path, int num_classes, const IdxReadLimits& limits = {});

}  // namespace trident::data
