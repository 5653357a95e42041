// safetensors reading and writing. The reader trusts nothing in the file: the header length,
// the JSON, every dtype, shape and byte range are checked before any tensor memory is taken,
// so the allocations never exceed the file's own size. The writer replaces files atomically.
#include "runtime/checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_file.h"

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

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kDTypes[] = {{"F32", DType::f32}, {"F64", DType::f64}, {"F16", DType::f16},
                                 {"BF16", DType::bf16}, {"I32", DType::i32}};

const char* safetensors_dtype(DType t) {
  for (const DTypeName& d : kDTypes)
    if (d.dtype == t) return d.name;
  throw Error("internal error: dtype without a safetensors name");
}

struct Entry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

// Parses the JSON header, rejecting duplicate keys (JSON libraries keep one silently) and
// nesting deeper than the format uses (which would only cost memory and stack).
json parse_header(const std::string& text, const std::function<Error(const std::string&)>& fail) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  auto check = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (depth > 3) throw fail("its JSON header nests deeper than the format allows");
    if (ev == json::parse_event_t::object_start) keys.emplace_back();
    if (ev == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (ev == json::parse_event_t::key && !keys.empty()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(k).second)
        throw fail("its JSON header has the key '" + k + "' twice" +
                   (keys.size() == 1 ? " (a duplicate tensor name)" : ""));
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), check, true, false);
  } catch (const json::parse_error& e) {
    throw fail("its JSON header is not valid JSON (error at byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception& e) {
    throw fail("its JSON header cannot be read (" + std::string(e.what()) + ")");
  }
}

Entry parse_entry(const std::string& name, const json& desc, uint64_t buffer_size,
                  const std::function<Error(const std::string&)>& fail) {
  const std::string t = "tensor '" + name + "'";
  if (!desc.is_object()) throw fail(t + " is not described by a JSON object");
  for (const auto& [k, v] : desc.items())
    if (k != "dtype" && k != "shape" && k != "data_offsets") throw fail(t + " has an unknown field '" + k + "'");
  if (!desc.contains("dtype") || !desc["dtype"].is_string()) throw fail(t + " has no dtype string");
  if (!desc.contains("shape") || !desc["shape"].is_array()) throw fail(t + " has no shape array");
  if (!desc.contains("data_offsets") || !desc["data_offsets"].is_array() || desc["data_offsets"].size() != 2)
    throw fail(t + " has no data_offsets pair");

  Entry e;
  e.name = name;
  const std::string& dt = desc["dtype"].get_ref<const std::string&>();
  const DTypeName* found = nullptr;
  for (const DTypeName& d : kDTypes)
    if (dt == d.name) found = &d;
  if (!found) throw fail(t + " has dtype '" + dt + "', which trident does not support (F32, F64, F16, BF16, I32)");
  e.dtype = found->dtype;

  uint64_t count = 1;
  for (const json& d : desc["shape"]) {
    if (d.is_number_integer() && !d.is_number_unsigned()) throw fail(t + " has a negative dimension");
    if (!d.is_number_unsigned()) throw fail(t + " has a dimension that is not an integer");
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(count, v, &count) ||
        count > static_cast<uint64_t>(INT64_MAX))
      throw fail(t + " has a shape whose element count overflows 64 bits");
    e.shape.push_back(static_cast<int64_t>(v));
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(dtype_size(e.dtype)), &bytes))
    throw fail(t + " has a shape whose byte size overflows 64 bits");

  for (const json& o : desc["data_offsets"])
    if (!o.is_number_unsigned()) throw fail(t + " has data_offsets that are not non-negative integers");
  e.begin = desc["data_offsets"][0].get<uint64_t>();
  e.end = desc["data_offsets"][1].get<uint64_t>();
  if (e.begin > e.end || e.end > buffer_size)
    throw fail(t + " has data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
               "] outside the " + std::to_string(buffer_size) + "-byte data buffer");
  if (e.end - e.begin != bytes)
    throw fail(t + " has " + std::to_string(e.end - e.begin) + " bytes of data but its dtype " + dt +
               " and shape " + shape_str(e.shape) + " need " + std::to_string(bytes));
  return e;
}

WeightMap parse(const Source& src, const std::string& file, Metadata* metadata) {
  std::function<Error(const std::string&)> fail = [&](const std::string& why) {
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

  const json header = parse_header(text, fail);
  if (!header.is_object()) throw fail("its JSON header is not an object");
  std::vector<Entry> entries;
  Metadata md;
  for (const auto& [key, value] : header.items()) {
    if (key != "__metadata__") {
      entries.push_back(parse_entry(key, value, buffer_size, fail));
      continue;
    }
    if (!value.is_object()) throw fail("its __metadata__ is not a JSON object");
    for (const auto& [k, v] : value.items()) {
      if (!v.is_string()) throw fail("its __metadata__ entry '" + k + "' is not a string");
      md.emplace(k, v.get<std::string>());
    }
  }
  // Tensors may not share bytes (empty tensors occupy none). Together with the bounds checks
  // this caps the memory taken below at the buffer's size.
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      throw fail("tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name +
                 "' overlap in the data buffer");

  WeightMap out;
  for (const Entry& e : entries) {
    HostTensor h{e.shape, e.dtype, std::vector<std::byte>(e.end - e.begin)};
    src.read(data_start + e.begin, h.data.size(), h.data.data());
    out.emplace(e.name, std::move(h));
  }
  if (metadata) *metadata = std::move(md);
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
    header[name] = {{"dtype", safetensors_dtype(t.dtype)}, {"shape", t.shape},
                    {"data_offsets", {offset, offset + need}}};
    offset += need;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
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
