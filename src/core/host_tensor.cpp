// Element-type conversion of host tensors (core/host_tensor.h): inputs arrive as f32, f64 or
// i32 arrays, and the executables read f32.
#include "core/host_tensor.h"

#include "core/error.h"

namespace trident {

HostTensor to_f32(const HostTensor& t, const std::string& what) {
  if (t.dtype == DType::f32) return t;
  const int64_t n = numel(t.shape);
  HostTensor out{t.shape, DType::f32, std::vector<std::byte>(static_cast<size_t>(n) * 4)};
  auto* dst = reinterpret_cast<float*>(out.data.data());
  if (t.dtype == DType::f64) {
    const auto* src = reinterpret_cast<const double*>(t.data.data());
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  } else if (t.dtype == DType::i32) {
    const auto* src = reinterpret_cast<const int32_t*>(t.data.data());
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  } else {
    throw Error(what + " has dtype " + std::string(dtype_name(t.dtype)) + "; expected f32, f64 or i32");
  }
  return out;
}

}  // namespace trident
