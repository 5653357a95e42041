// The safetensors JSON header, parsed in one linear pass (a SAX handler, no document of the
// whole header is ever built) into checked tensor entries that cover the data buffer exactly.
// Internal to the safetensors reader and writer.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "runtime/checkpoint/safetensors.h"

namespace trident::runtime::safetensors_detail {

inline constexpr size_t kMaxTensors = 1'000'000;  // tensors in one file
inline constexpr size_t kMaxRank = 8;             // entries in a shape (and any header array)

struct Entry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;
  // An I64 tensor (PyTorch's num_batches_tracked, integer buffers) is stored in 8 bytes an
  // element and read as i32: every value must fit.
  bool narrowed_from_i64 = false;
};

struct Header {
  std::vector<Entry> entries;  // in file order
  Metadata metadata;
};

// Builds the one Error of a damaged file from a clause saying why.
using Fail = std::function<Error(const std::string&)>;

// Parses and checks the header against a data buffer of `buffer_size` bytes: duplicate keys,
// nesting, every dtype, shape and range, and that every data byte belongs to exactly one tensor.
Header parse_header(const std::string& text, uint64_t buffer_size, const Fail& fail);

// The safetensors name of a dtype trident writes ("F32", ...).
const char* safetensors_dtype(DType t);

}  // namespace trident::runtime::safetensors_detail
