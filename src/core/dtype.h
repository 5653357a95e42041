// Element types known to trident and their sizes.
// One enum for the whole engine: the IR, the memory planner and every backend agree on it.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace trident {

enum class DType { f32, f64, f16, bf16, i32 };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
// Parses "f32", "f64", ...; throws trident::Error naming the text otherwise.
DType parse_dtype(std::string_view name);
bool is_floating(DType t);

}  // namespace trident
