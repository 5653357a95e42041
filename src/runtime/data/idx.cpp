// Reader for IDX files, gzip-compressed or plain (see idx.h).
// A small ByteSource hides the two back ends (stdio, zlib); header checks run before the payload
// is allocated, and the payload buffer only grows as data actually arrives (never past the claim).
#include "runtime/data/idx.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string_view>

#include "core/error.h"
#include "core/input_file.h"

namespace trident::data {
namespace {

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*X", digits, v);
  return buf;
}

const char* idx_type_name(uint8_t code) {
  switch (code) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return nullptr;
  }
}

// Sequential reader over a plain or gzip file; throws trident::Error on any I/O or zlib fault.
class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path) {
    InputFile in(path, "IDX file");
    unsigned char head[2] = {0, 0};
    if (in.size() >= 2) in.read_at(0, 2, head);
    gzip_ = head[0] == 0x1f && head[1] == 0x8b;
    if (!gzip_) size_ = static_cast<int64_t>(in.size());
    const int fd = in.release();
    if (gzip_) {
      gz_ = gzdopen(fd, "rb");
      if (gz_ == nullptr) {
        ::close(fd);
        throw Error(path + ": cannot open as gzip: " + std::strerror(errno));
      }
      gzbuffer(gz_, 1 << 18);
    } else {
      file_ = ::fdopen(fd, "rb");
      if (file_ == nullptr) {
        ::close(fd);
        fail_errno("cannot open");
      }
    }
  }
  ~ByteSource() {
    if (file_ != nullptr) std::fclose(file_);
    if (gz_ != nullptr) gzclose(gz_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  const std::string& path() const { return path_; }
  bool gzip() const { return gzip_; }
  // Size in bytes of a plain regular file, -1 when unknown (gzip, pipes).
  int64_t plain_size() const { return size_; }

  // Reads up to n bytes into dst; fewer only at the end of the (decompressed) data.
  int64_t read(uint8_t* dst, int64_t n) {
    int64_t total = 0;
    while (total < n) {
      const int64_t want = std::min<int64_t>(n - total, int64_t{1} << 30);
      int64_t got = 0;
      if (gzip_) {
        const int r = gzread(gz_, dst + total, static_cast<unsigned>(want));
        check_gzip();
        if (r < 0) throw Error(path_ + ": corrupt gzip stream (zlib reported an error)");
        got = r;
      } else {
        got = static_cast<int64_t>(std::fread(dst + total, 1, static_cast<size_t>(want), file_));
        if (std::ferror(file_)) fail_errno("read error");
      }
      if (got == 0) break;
      total += got;
    }
    return total;
  }

  // Counts the bytes left (up to `cap`, then stops), for reporting trailing garbage.
  int64_t count_remaining(int64_t cap) {
    std::vector<uint8_t> buf(1 << 16);
    int64_t total = 0;
    while (total < cap) {
      const int64_t got = read(buf.data(), static_cast<int64_t>(buf.size()));
      if (got == 0) break;
      total += got;
    }
    return total;
  }

 private:
  [[noreturn]] void fail_errno(const char* what) {
    throw Error(path_ + ": " + what + ": " + std::strerror(errno));
  }
  void check_gzip() {
    int errnum = Z_OK;
    const char* msg = gzerror(gz_, &errnum);
    if (errnum == Z_OK) return;
    std::string detail = msg != nullptr && *msg != '\0' ? msg : "unknown error";
    if (detail.rfind(path_ + ": ", 0) == 0) detail.erase(0, path_.size() + 2);  // zlib adds it
    if (errnum == Z_ERRNO) fail_errno("read error");
    if (errnum == Z_BUF_ERROR)
      throw Error(path_ + ": truncated or corrupt gzip stream (zlib: " + detail + ")");
    throw Error(path_ + ": corrupt gzip stream (zlib: " + detail + ")");
  }

  std::string path_;
  std::FILE* file_ = nullptr;
  gzFile gz_ = nullptr;
  bool gzip_ = false;
  int64_t size_ = -1;
};

// What the kind of file being read is called in messages and what it must look like.
struct Kind {
  uint32_t magic;
  int rank;
  const char* noun;    // "images" / "labels"
  const char* layout;  // "3 dimensions (count, height, width)"
};
constexpr Kind kImages{kIdxImagesMagic, 3, "images", "3 dimensions (count, height, width)"};
constexpr Kind kLabels{kIdxLabelsMagic, 1, "labels", "1 dimension (count)"};

uint32_t big_endian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reads and checks magic, type and rank; returns the dimensions (not yet range-checked).
std::vector<int64_t> read_header(ByteSource& src, const Kind& kind) {
  const std::string& path = src.path();
  const char* where = src.gzip() ? "decompressed data" : "file";
  uint8_t magic_bytes[4];
  const int64_t got = src.read(magic_bytes, 4);
  if (got < 4)
    throw Error(path + ": truncated: the " + where + " holds only " + std::to_string(got) +
                " bytes, too few for the 4-byte IDX magic number");
  const uint32_t magic = big_endian32(magic_bytes);
  const std::string expected =
      "expected " + hex(kind.magic, 8) + " for uint8 " + std::string(kind.noun);
  if (magic_bytes[0] != 0 || magic_bytes[1] != 0)
    throw Error(path + ": not an IDX file: bad magic number " + hex(magic, 8) + " (" + expected +
                ")");
  const uint8_t type = magic_bytes[2];
  if (type != 0x08) {
    const char* name = idx_type_name(type);
    throw Error(path + ": unsupported IDX element type " + hex(type, 2) +
                (name != nullptr ? " (" + std::string(name) + ")" : std::string(" (unknown)")) +
                "; only unsigned byte (0x08) data is supported (" + expected + ")");
  }
  const int rank = magic_bytes[3];
  if (rank != kind.rank)
    throw Error(path + ": IDX " + kind.noun + " must have " + kind.layout +
                " but the header (magic " + hex(magic, 8) + ") declares " + std::to_string(rank) +
                " (" + expected + ")");
  uint8_t dim_bytes[4 * 3];
  const int64_t dims_got = src.read(dim_bytes, 4 * rank);
  if (dims_got < 4 * rank)
    throw Error(path + ": truncated header: the " + where + " ends after " +
                std::to_string(4 + dims_got) + " bytes but the header needs " +
                std::to_string(4 + 4 * rank));
  std::vector<int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) {
    dims[i] = big_endian32(dim_bytes + 4 * i);
    if (dims[i] == 0)
      throw Error(path + ": dimension " + std::to_string(i) + " of the IDX header is zero");
  }
  return dims;
}

// Reads exactly `bytes` of payload and, when they are the whole payload (`whole`), rejects
// anything after them. `what` names the payload ("60000 images of 28x28", ...) and `unit` its
// bytes ("pixel data") for the messages.
std::vector<uint8_t> read_payload(ByteSource& src, int64_t header_bytes, int64_t bytes, bool whole,
                                  const std::string& what, const std::string& unit) {
  const std::string& path = src.path();
  auto truncated = [&](int64_t have, const char* where) {
    return Error(path + ": truncated: header says " + what + " but the " + where + " holds " +
                 std::to_string(have) + " bytes of " + unit + " (" + std::to_string(bytes) +
                 " expected)");
  };
  auto trailing = [&](int64_t extra, bool capped) {
    return Error(path + ": trailing garbage: " + (capped ? "more than " : "") +
                 std::to_string(extra) + " bytes follow the " + std::to_string(bytes) +
                 " bytes of " + unit + " that the header declares");
  };

  std::vector<uint8_t> out;
  if (src.plain_size() >= 0) {
    // Plain regular file: the size is known, so check it before allocating anything.
    const int64_t have = src.plain_size() - header_bytes;
    if (have < bytes) throw truncated(have, "file");
    if (have > bytes && whole) throw trailing(have - bytes, false);
    out.resize(static_cast<size_t>(bytes));
    const int64_t got = src.read(out.data(), bytes);
    if (got < bytes) throw truncated(got, "file");
  } else {
    // Size unknown: grow with the data actually read, never beyond what the header claims.
    constexpr int64_t kChunk = int64_t{16} << 20;
    out.reserve(static_cast<size_t>(std::min(bytes, kChunk)));
    int64_t done = 0;
    while (done < bytes) {
      const int64_t want = std::min(kChunk, bytes - done);
      if (static_cast<int64_t>(out.capacity()) < done + want)
        out.reserve(static_cast<size_t>(
            std::min(bytes, std::max(done + want, 2 * static_cast<int64_t>(out.capacity())))));
      out.resize(static_cast<size_t>(done + want));
      const int64_t got = src.read(out.data() + done, want);
      done += got;
      if (got < want)
        throw truncated(done, src.gzip() ? "decompressed file" : "file");
    }
    if (!whole) return out;
    constexpr int64_t kCountCap = int64_t{16} << 20;
    const int64_t extra = src.count_remaining(kCountCap + 1);
    if (extra > 0) throw trailing(std::min(extra, kCountCap), extra > kCountCap);
  }
  return out;
}

// How many of `declared` records a reader takes under `limits`.
int64_t records_to_read(int64_t declared, const IdxReadLimits& limits) {
  return limits.max_count > 0 ? std::min(declared, limits.max_count) : declared;
}

}  // namespace

bool is_gzip_file(const std::string& path) {
  ByteSource src(path);
  return src.gzip();
}

IdxImages read_idx_images(const std::string& path, const IdxReadLimits& limits) {
  ByteSource src(path);
  const std::vector<int64_t> dims = read_header(src, kImages);
  const int64_t count = dims[0], height = dims[1], width = dims[2];
  const std::string shape =
      std::to_string(count) + " images of " + std::to_string(height) + "x" + std::to_string(width);
  if (count > kIdxMaxCount)
    throw Error(path + ": absurd header: " + shape + " exceeds the limit of " +
                std::to_string(kIdxMaxCount) + " images");
  if (height > kIdxMaxSide || width > kIdxMaxSide)
    throw Error(path + ": absurd header: " + shape + " exceeds the limit of " +
                std::to_string(kIdxMaxSide) + " pixels per side");
  IdxImages out;
  out.declared_count = count;
  out.count = records_to_read(count, limits);
  out.height = static_cast<int>(height);
  out.width = static_cast<int>(width);
  const int64_t wanted = out.count * height * width;  // <= 2^56, no overflow
  if (wanted > kIdxMaxPayloadBytes)
    throw Error(path + ": absurd header: " + std::to_string(out.count) + " images of " + std::to_string(height) +
                "x" + std::to_string(width) + " need " + std::to_string(wanted) + " bytes, more than the limit of " +
                std::to_string(kIdxMaxPayloadBytes));
  if (limits.before_payload) limits.before_payload(out.count, wanted);
  out.pixels = read_payload(src, 4 + 4 * 3, wanted, out.count == count,
                            out.count == count ? shape : shape + " (the first " + std::to_string(out.count) + " read)",
                            "pixel data");
  return out;
}

IdxLabels read_idx_labels(const std::string& path, int num_classes, const IdxReadLimits& limits) {
  if (num_classes < 1 || num_classes > 256)
    throw Error(path + ": cannot check labels against " + std::to_string(num_classes) +
                " classes; uint8 IDX labels need between 1 and 256 classes");
  ByteSource src(path);
  const std::vector<int64_t> dims = read_header(src, kLabels);
  const int64_t count = dims[0];
  if (count > kIdxMaxCount)
    throw Error(path + ": absurd header: " + std::to_string(count) +
                " labels exceed the limit of " + std::to_string(kIdxMaxCount));
  IdxLabels out;
  out.declared_count = count;
  out.count = records_to_read(count, limits);
  if (limits.before_payload) limits.before_payload(out.count, out.count);
  out.labels = read_payload(src, 4 + 4, out.count, out.count == count,
                            std::to_string(count) + " labels" +
                                (out.count == count ? "" : " (the first " + std::to_string(out.count) + " read)"),
                            "label data");
  for (int64_t i = 0; i < out.count; ++i) {
    if (out.labels[static_cast<size_t>(i)] >= num_classes)
      throw Error(path + ": label " + std::to_string(out.labels[static_cast<size_t>(i)]) +
                  " at index " + std::to_string(i) + " is outside the valid range [0, " +
                  std::to_string(num_classes) + ")");
  }
  return out;
}

}  // namespace trident::data
