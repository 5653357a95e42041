// Linear-time parsing of the safetensors header. nlohmann's callback parser rescans an
// object's members at every object end (quadratic in the tensor count), so a SAX handler
// builds a small JSON value per tensor instead, checks it and drops it; caps on the tensor
// count, the rank and the nesting bound the memory whatever the header holds.
#include "runtime/checkpoint/safetensors_header.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "core/checked_math.h"
#include "core/printable.h"

namespace trident::runtime::safetensors_detail {

namespace {

using nlohmann::json;

struct DTypeName {
  const char* name;
  DType dtype;
  bool narrowed_from_i64 = false;  // stored as I64, read as i32
};
constexpr DTypeName kDTypes[] = {{"F32", DType::f32}, {"F64", DType::f64},  {"F16", DType::f16},
                                 {"BF16", DType::bf16}, {"I32", DType::i32}, {"I64", DType::i32, true}};

Entry parse_entry(const std::string& name, const json& desc, uint64_t buffer_size, const Fail& fail) {
  const std::string t = "tensor " + quoted_name(name);
  if (!desc.is_object()) throw fail(t + " is not described by a JSON object");
  for (const auto& [k, v] : desc.items())
    if (k != "dtype" && k != "shape" && k != "data_offsets") throw fail(t + " has an unknown field " + quoted_name(k));
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
  if (!found)
    throw fail(t + " has dtype " + quoted_name(dt) + ", which trident does not support (F32, F64, F16, BF16, I32, I64)");
  e.dtype = found->dtype;
  e.narrowed_from_i64 = found->narrowed_from_i64;

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
  try {
    bytes = checked_bytes(checked_numel(e.shape, t), e.narrowed_from_i64 ? sizeof(int64_t) : dtype_size(e.dtype), t);
  } catch (const Error& err) {
    throw fail(err.what());
  }

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

// Depth 1 is the header object, depth 2 a tensor's description (or __metadata__), depth 3 a
// shape or data_offsets array; nothing the format uses goes deeper.
constexpr int kMaxDepth = 3;

class Handler final : public nlohmann::json_sax<json> {
 public:
  Handler(uint64_t buffer_size, const Fail& fail) : buffer_size_(buffer_size), fail_(fail) {}

  Header take() {
    if (!top_is_object_) throw fail_("its JSON header is not an object");
    return std::move(out_);
  }

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override { return value(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return value(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool string(string_t& v) override { return value(json(std::move(v))); }
  bool binary(binary_t&) override { throw fail_("its JSON header holds binary data"); }

  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    if (depth_ == 1) {
      if (!names_.insert(k).second)
        throw fail_("its JSON header has the key " + quoted_name(k) + " twice" + (k == "__metadata__" ? "" : " (a duplicate tensor name)"));
      if (k != "__metadata__" && ++tensors_ > kMaxTensors)
        throw fail_("it describes more than " + std::to_string(kMaxTensors) + " tensors");
      name_ = k;
    } else if (!stack_.empty()) {
      if (stack_.back()->contains(k)) throw fail_("its JSON header has the key " + quoted_name(k) + " twice");
      key_ = k;
    }
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) override {
    throw fail_("its JSON header is not valid JSON (error at byte " + std::to_string(position) + ")");
  }

 private:
  // A value inside a tensor's description goes into its JSON; at depth 1 it is a whole
  // (non-object) description, checked at once; a top-level scalar is not an object.
  bool value(json v) {
    if (!top_is_object_) return true;  // a scalar or an array at the top: reported at the end
    if (depth_ == 1) finish(v);
    else if (!stack_.empty()) insert(std::move(v));
    return true;
  }

  bool open(json container) {
    if (++depth_ > kMaxDepth) throw fail_("its JSON header nests deeper than the format allows");
    if (depth_ == 1) {
      top_is_object_ = container.is_object();
      return true;
    }
    if (!top_is_object_) return true;  // reported once parsing ends (deep nesting first)
    if (depth_ == 2) {
      current_ = std::move(container);
      stack_.push_back(&current_);
    } else {
      stack_.push_back(insert(std::move(container)));
    }
    return true;
  }

  bool close() {
    if (depth_ >= 2 && top_is_object_) {
      stack_.pop_back();
      if (depth_ == 2) finish(current_);
    }
    --depth_;
    return true;
  }

  json* insert(json v) {
    json& parent = *stack_.back();
    if (parent.is_array()) {
      if (parent.size() >= kMaxRank)
        throw fail_("tensor " + quoted_name(name_) + " has an array of more than " + std::to_string(kMaxRank) +
                    " entries in its description (the most a shape may have)");
      parent.push_back(std::move(v));
      return &parent.back();
    }
    return &(parent[key_] = std::move(v));
  }

  // One complete depth-1 member: a tensor's description or the metadata.
  void finish(const json& v) {
    if (name_ != "__metadata__") {
      out_.entries.push_back(parse_entry(name_, v, buffer_size_, fail_));
      return;
    }
    if (!v.is_object()) throw fail_("its __metadata__ is not a JSON object");
    for (const auto& [k, s] : v.items()) {
      if (!s.is_string()) throw fail_("its __metadata__ entry " + quoted_name(k) + " is not a string");
      out_.metadata.emplace(k, s.get<std::string>());
    }
  }

  uint64_t buffer_size_;
  const Fail& fail_;
  int depth_ = 0;
  bool top_is_object_ = false;
  std::unordered_set<std::string> names_;  // depth-1 keys seen
  size_t tensors_ = 0;
  std::string name_, key_;  // the depth-1 key and the latest deeper key
  json current_;            // the depth-2 value being built
  std::vector<json*> stack_;
  Header out_;
};

// Every byte of the data buffer belongs to exactly one tensor (empty tensors own none): no
// overlap, no gap, nothing after the last tensor. With the bounds checks this also caps the
// memory the reader takes at the buffer's size.
void check_coverage(const std::vector<Entry>& entries, uint64_t buffer_size, const Fail& fail) {
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  uint64_t covered = 0;
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const Entry& e = *by_offset[i];
    if (e.begin < covered)
      throw fail("tensors " + quoted_name(by_offset[i - 1]->name) + " and " + quoted_name(e.name) + " overlap in the data buffer");
    if (e.begin > covered)
      throw fail("bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
                 ") of the data buffer belong to no tensor");
    covered = e.end;
  }
  if (covered != buffer_size)
    throw fail("its data buffer has " + std::to_string(buffer_size - covered) + " bytes after the last tensor's data");
}

}  // namespace

Header parse_header(const std::string& text, uint64_t buffer_size, const Fail& fail) {
  Handler handler(buffer_size, fail);
  try {
    json::sax_parse(text, &handler, json::input_format_t::json, true);
  } catch (const json::exception& e) {
    throw fail("its JSON header cannot be read (" + std::string(e.what()) + ")");
  }
  Header h = handler.take();
  check_coverage(h.entries, buffer_size, fail);
  return h;
}

const char* safetensors_dtype(DType t) {
  for (const DTypeName& d : kDTypes)
    if (d.dtype == t) return d.name;
  throw Error("internal error: dtype without a safetensors name");
}

}  // namespace trident::runtime::safetensors_detail
