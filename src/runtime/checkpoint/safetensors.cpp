// safetensors reading and writing. The reader trusts nothing in the file: the header length,
// the JSON, every dtype, shape and byte range are checked (safetensors_header.cpp) before any
// tensor memory is taken, so the allocations never exceed the file's own size. The writer
// replaces files atomically.
#include "runtime/checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <tuple>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/printable.h"
#include "runtime/checkpoint/safetensors_header.h"

namespace trident::runtime {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

using nlohmann::json;

// Where the bytes come from: memory (fuzzing, tests) or a file read piece by piece.
class Source {
 public:
  virtual ~Source() = default;
  virtual uint64_t size() const = 0;
  virtual void read(uint64_t offset, size_t n, void* dst) const = 0;
};

class MemorySource final : public Source {
 public:
  explicit MemorySource(std::span<const std::byte> b) : bytes_(b) {}
  uint64_t size() const override { return bytes_.size(); }
  void read(uint64_t offset, size_t n, void* dst) const override {
    if (n) std::memcpy(dst, bytes_.data() + offset, n);
  }

 private:
  std::span<const std::byte> bytes_;
};

class FileSource final : public Source {
 public:
  explicit FileSource(const std::string& path) : file_(path, "safetensors file") {}
  uint64_t size() const override { return file_.size(); }
  void read(uint64_t offset, size_t n, void* dst) const override { file_.read_at(offset, n, dst); }

 private:
  InputFile file_;
};

std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// The CRC-32C of the data buffer: the tensors in offset order (they cover it exactly).
uint32_t data_checksum(const std::vector<std::pair<uint64_t, const HostTensor*>>& by_offset) {
  uint32_t crc = 0;
  for (const auto& [begin, t] : by_offset) crc = crc32c(t->data.data(), t->data.size(), crc);
  return crc;
}

// The CRC-32C of the header's meaning: each tensor's name, dtype, shape and range (in name order)
// and each metadata entry but this checksum (in key order), every field followed by a zero byte.
uint32_t header_checksum(const std::vector<std::tuple<std::string, std::string, Shape, uint64_t, uint64_t>>& tensors,
                         const Metadata& metadata) {
  uint32_t crc = 0;
  auto add = [&](const std::string& field) { crc = crc32c(field.c_str(), field.size() + 1, crc); };
  for (const auto& [name, dtype, shape, begin, end] : tensors) {
    add(name);
    add(dtype);
    add(shape_str(shape));
    add(std::to_string(begin) + ":" + std::to_string(end));
  }
  for (const auto& [key, value] : metadata)
    if (key != kHeaderChecksumKey) add(key), add(value);
  return crc;
}

bool is_hex32(const std::string& s) { return s.size() == 8 && s.find_first_not_of("0123456789abcdef") == std::string::npos; }

// A file trident wrote (its writer entry) must carry both checksums, and a training checkpoint
// (older ones recorded the data's alone) the data's; where the header records its own, the
// header must match it.
void verify_header(const safetensors_detail::Header& header, const std::string& file, const safetensors_detail::Fail& fail) {
  const Metadata& md = header.metadata;
  const auto writer = md.find(kWriterKey), format = md.find("format"), crc = md.find(kHeaderChecksumKey);
  const bool written_here = writer != md.end() && writer->second == kWriterTrident;
  const bool checkpoint = format != md.end() && format->second.rfind("trident-checkpoint", 0) == 0;
  const char* missing = (written_here || checkpoint) && !md.count(kDataChecksumKey) ? kDataChecksumKey
                        : written_here && crc == md.end()                           ? kHeaderChecksumKey
                                                                                    : nullptr;
  if (missing)
    throw Error("'" + file + "' is damaged: it is a file trident wrote, but its metadata lacks the checksum '" +
                missing + "' trident writes with it");
  if (crc == md.end()) return;
  if (!is_hex32(crc->second)) throw fail(std::string("its metadata '") + kHeaderChecksumKey + "' is not 8 lowercase hexadecimal digits");
  std::vector<std::tuple<std::string, std::string, Shape, uint64_t, uint64_t>> tensors;
  for (const safetensors_detail::Entry& e : header.entries)
    tensors.emplace_back(e.name, e.narrowed_from_i64 ? "I64" : safetensors_detail::safetensors_dtype(e.dtype), e.shape,
                         e.begin, e.end);
  std::sort(tensors.begin(), tensors.end());
  const std::string got = hex32(header_checksum(tensors, md));
  if (got != crc->second)
    throw Error("'" + file + "' is damaged: its header has CRC-32C " + got + " but its metadata records " + crc->second +
                ", so its names, shapes or metadata changed after it was written");
}

// Where the metadata records a checksum, the data must match it.
void verify_checksum(const safetensors_detail::Header& header, const WeightMap& tensors, const std::string& file,
                     const safetensors_detail::Fail& fail) {
  const auto it = header.metadata.find(kDataChecksumKey);
  if (it == header.metadata.end()) return;
  const std::string& want = it->second;
  if (want.size() != 8 || want.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw fail(std::string("its metadata '") + kDataChecksumKey + "' is not 8 lowercase hexadecimal digits");
  std::vector<std::pair<uint64_t, const HostTensor*>> by_offset;
  for (const safetensors_detail::Entry& e : header.entries) by_offset.emplace_back(e.begin, &tensors.at(e.name));
  std::sort(by_offset.begin(), by_offset.end());
  const std::string got = hex32(data_checksum(by_offset));
  if (got != want)
    throw Error("'" + file + "' is damaged: its tensor data has CRC-32C " + got + " but its metadata records " + want +
                ", so the file changed after it was written");
}

// I64 values as i32 bytes; a value outside the 32-bit range is the file's error.
std::vector<std::byte> narrow_i64(const std::vector<std::byte>& wide, const std::string& name,
                                  const safetensors_detail::Fail& fail) {
  std::vector<std::byte> out(wide.size() / 2);
  for (size_t i = 0; i < wide.size() / sizeof(int64_t); ++i) {
    int64_t v;
    std::memcpy(&v, wide.data() + i * sizeof v, sizeof v);
    if (v < INT32_MIN || v > INT32_MAX)
      throw fail("tensor " + quoted_name(name) + " holds the I64 value " + std::to_string(v) +
                 ", outside the 32-bit range trident reads I64 tensors into");
    const auto narrow = static_cast<int32_t>(v);
    std::memcpy(out.data() + i * sizeof narrow, &narrow, sizeof narrow);
  }
  return out;
}

WeightMap parse(const Source& src, const std::string& file, Metadata* metadata) {
  const safetensors_detail::Fail fail = [&](const std::string& why) {
    return Error("'" + file + "' is not a valid safetensors file: " + why);
  };
  const uint64_t size = src.size();
  if (size < 8)
    throw fail("it has " + std::to_string(size) + " bytes, too few for the 8-byte header length");
  unsigned char len_bytes[8];
  src.read(0, 8, len_bytes);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > kMaxSafetensorsHeader)
    throw fail("its header length " + std::to_string(header_len) + " exceeds the limit of " +
               std::to_string(kMaxSafetensorsHeader) + " bytes");
  if (header_len > size - 8)
    throw fail("its header length " + std::to_string(header_len) + " is more than the " +
               std::to_string(size - 8) + " bytes that follow (is the file truncated?)");
  std::string text(header_len, '\0');
  src.read(8, header_len, text.data());
  const uint64_t data_start = 8 + header_len, buffer_size = size - data_start;

  safetensors_detail::Header header = safetensors_detail::parse_header(text, buffer_size, fail);
  verify_header(header, file, fail);  // before any tensor memory is taken
  WeightMap out;
  for (const safetensors_detail::Entry& e : header.entries) {
    HostTensor h{e.shape, e.dtype, std::vector<std::byte>(e.end - e.begin)};
    src.read(data_start + e.begin, h.data.size(), h.data.data());
    if (e.narrowed_from_i64) h.data = narrow_i64(h.data, e.name, fail);
    out.emplace(e.name, std::move(h));
  }
  verify_checksum(header, out, file, fail);
  for (const char* key : {kDataChecksumKey, kHeaderChecksumKey, kWriterKey})
    header.metadata.erase(key);  // the container's, not the caller's
  if (metadata) *metadata = std::move(header.metadata);
  return out;
}

}  // namespace

WeightMap read_safetensors(const std::string& path, Metadata* metadata) {
  FileSource src(path);
  return parse(src, path, metadata);
}

WeightMap read_safetensors_from_memory(std::span<const std::byte> bytes, const std::string& name,
                                       Metadata* metadata) {
  MemorySource src(bytes);
  return parse(src, name, metadata);
}

std::vector<std::byte> encode_safetensors(const WeightMap& weights, const Metadata& metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : weights) {
    if (name == "__metadata__") throw Error("a tensor cannot be named '__metadata__' in a safetensors file");
    const uint64_t need = static_cast<uint64_t>(numel(t.shape)) * dtype_size(t.dtype);
    if (t.data.size() != need)
      throw Error("tensor '" + name + "' holds " + std::to_string(t.data.size()) + " bytes but its shape " +
                  shape_str(t.shape) + " needs " + std::to_string(need));
    header[name] = {{"dtype", safetensors_detail::safetensors_dtype(t.dtype)}, {"shape", t.shape},
                    {"data_offsets", {offset, offset + need}}};
    offset += need;
  }
  std::vector<std::pair<uint64_t, const HostTensor*>> by_offset;
  uint64_t at = 0;
  for (const auto& [name, t] : weights) by_offset.emplace_back(at++, &t);  // packed in name order
  Metadata with_checksum = metadata;
  with_checksum[kWriterKey] = kWriterTrident;
  with_checksum[kDataChecksumKey] = hex32(data_checksum(by_offset));
  std::vector<std::tuple<std::string, std::string, Shape, uint64_t, uint64_t>> entries;
  for (const auto& [name, t] : weights)
    entries.emplace_back(name, safetensors_detail::safetensors_dtype(t.dtype), t.shape,
                         header[name]["data_offsets"][0].get<uint64_t>(), header[name]["data_offsets"][1].get<uint64_t>());
  with_checksum[kHeaderChecksumKey] = hex32(header_checksum(entries, with_checksum));
  header["__metadata__"] = with_checksum;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception&) {
    throw Error("a tensor name or metadata entry is not valid UTF-8 and cannot go into a safetensors header");
  }
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // data starts 8-byte aligned

  std::vector<std::byte> out(8 + text.size() + offset);
  uint64_t len = text.size();
  for (int i = 0; i < 8; ++i, len >>= 8) out[i] = static_cast<std::byte>(len & 0xff);
  std::memcpy(out.data() + 8, text.data(), text.size());
  std::byte* data = out.data() + 8 + text.size();
  for (const auto& [name, t] : weights) {
    if (!t.data.empty()) std::memcpy(data, t.data.data(), t.data.size());
    data += t.data.size();
  }
  return out;
}

void write_safetensors(const std::string& path, const WeightMap& weights, const Metadata& metadata) {
  const std::vector<std::byte> bytes = encode_safetensors(weights, metadata);
  write_file_atomically(path, bytes.data(), bytes.size());
}

}  // namespace trident::runtime
