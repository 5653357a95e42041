// TensorProto → Const: validates dims, dtype and that the stored data matches the declared
// element count before anything is allocated, so a corrupt header cannot ask for gigabytes.
#include <cstring>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/printable.h"
#include "frontend/onnx/onnx_detail.h"

namespace trident::frontend::onnx_detail {

namespace {
const char* type_name(int t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return "float32";
    case onnx::TensorProto::DOUBLE: return "float64";
    case onnx::TensorProto::FLOAT16: return "float16";
    case onnx::TensorProto::BFLOAT16: return "bfloat16";
    case onnx::TensorProto::INT64: return "int64";
    case onnx::TensorProto::INT32: return "int32";
    case onnx::TensorProto::INT8: return "int8";
    case onnx::TensorProto::UINT8: return "uint8";
    case onnx::TensorProto::BOOL: return "bool";
    case onnx::TensorProto::STRING: return "string";
    default: return "an unknown type";
  }
}
}  // namespace

Const read_tensor(const onnx::TensorProto& t, const std::string& where, const ExternalData& external) {
  Const c;
  c.name = t.name();
  const std::string what = where + "tensor " + quoted_name(t.name());
  const bool is_external = t.data_location() == onnx::TensorProto::EXTERNAL;
  if (!is_external && t.external_data_size() > 0)
    throw Error(what + " lists external data but does not say its data is external");
  if (t.has_segment()) throw Error(what + " is segmented, which trident does not read");
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > kMaxExtent)
      throw Error(what + " has an invalid extent " + std::to_string(d));
    c.dims.push_back(d);
    n = checked_mul(n, d, what);  // d <= 2^24 and n <= 2^28 before this: it cannot wrap
    if (n > kMaxElements) throw Error(what + " is absurdly large (more than 2^28 elements)");
  }
  const int type = t.data_type();
  const bool is_byte = type == onnx::TensorProto::INT8 || type == onnx::TensorProto::UINT8;
  if (is_external && type != onnx::TensorProto::FLOAT && type != onnx::TensorProto::INT64 &&
      type != onnx::TensorProto::INT32 && !is_byte)
    throw Error(what + " has element type " + type_name(type) +
                "; trident reads float32 weights, int8/uint8 quantized weights and int64/int32 shapes only");
  // At most 8 bytes an element: a larger file range cannot be this tensor's data.
  const std::string external_bytes = is_external ? external.read(t, static_cast<uint64_t>(n) * 8, what) : std::string();
  const std::string& raw = is_external ? external_bytes : t.raw_data();
  auto expect_count = [&](int64_t have, const char* field) {
    if (have != n)
      throw Error(what + " declares " + std::to_string(n) + " elements (dims " + shape_str(c.dims) +
                  ") but its " + field + " holds " + std::to_string(have));
  };
  if (type == onnx::TensorProto::FLOAT) {
    c.is_float = true;
    if (!raw.empty() || t.float_data_size() == 0) {
      if (raw.size() % 4 != 0) throw Error(what + " has raw data not a multiple of 4 bytes");
      expect_count(static_cast<int64_t>(raw.size() / 4), "raw data");
      c.f.resize(static_cast<size_t>(n));
      if (n) std::memcpy(c.f.data(), raw.data(), raw.size());
    } else {
      expect_count(t.float_data_size(), "float_data");
      c.f.assign(t.float_data().begin(), t.float_data().end());
    }
  } else if (type == onnx::TensorProto::INT64 || type == onnx::TensorProto::INT32) {
    c.onnx_type = type;
    const size_t es = type == onnx::TensorProto::INT64 ? 8 : 4;
    if (!raw.empty() || (t.int64_data_size() == 0 && t.int32_data_size() == 0)) {
      if (raw.size() % es != 0) throw Error(what + " has raw data not a multiple of its element size");
      expect_count(static_cast<int64_t>(raw.size() / es), "raw data");
      c.i.resize(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) {
        if (es == 8) {
          std::memcpy(&c.i[k], raw.data() + k * 8, 8);
        } else {
          int32_t v;
          std::memcpy(&v, raw.data() + k * 4, 4);
          c.i[k] = v;
        }
      }
    } else if (type == onnx::TensorProto::INT64) {
      expect_count(t.int64_data_size(), "int64_data");
      c.i.assign(t.int64_data().begin(), t.int64_data().end());
    } else {
      expect_count(t.int32_data_size(), "int32_data");
      c.i.assign(t.int32_data().begin(), t.int32_data().end());
    }
  } else if (is_byte) {
    // A QDQ model's quantized weights: one byte an element, or int32_data.
    c.onnx_type = type;
    if (!raw.empty() || t.int32_data_size() == 0) {
      expect_count(static_cast<int64_t>(raw.size()), "raw data");
      c.i.resize(raw.size());
      for (size_t k = 0; k < raw.size(); ++k)
        c.i[k] = type == onnx::TensorProto::INT8 ? int64_t{static_cast<int8_t>(raw[k])}
                                                 : int64_t{static_cast<uint8_t>(raw[k])};
    } else {
      expect_count(t.int32_data_size(), "int32_data");
      const int64_t lo = type == onnx::TensorProto::INT8 ? -128 : 0, hi = type == onnx::TensorProto::INT8 ? 127 : 255;
      for (int32_t v : t.int32_data()) {
        if (v < lo || v > hi) throw Error(what + " holds " + std::to_string(v) + ", outside its type's range");
        c.i.push_back(v);
      }
    }
  } else if (type == onnx::TensorProto::BOOL && !is_external) {
    // A flag (Dropout's training_mode in a training-mode export): one byte an element, or int32_data.
    if (!raw.empty() || t.int32_data_size() == 0) {
      expect_count(static_cast<int64_t>(raw.size()), "raw data");
      for (unsigned char b : raw) c.i.push_back(b != 0);
    } else {
      expect_count(t.int32_data_size(), "int32_data");
      for (int32_t v : t.int32_data()) c.i.push_back(v != 0);
    }
  } else {
    throw Error(what + " has element type " + type_name(type) +
                "; trident reads float32 weights, int8/uint8 quantized weights, int64/int32 shapes and bool flags only");
  }
  return c;
}

}  // namespace trident::frontend::onnx_detail
