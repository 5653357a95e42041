// Copying a batch out of a loader's ring into the executable's input: a ResNet-50 batch of 256
// f32 images at 224² is 154 MB, which one thread copies in about as long as an H200 trains the
// step on it, while the host threads sit idle waiting for the device. The copy goes in 1 MiB
// pieces over them (OpenMP); a small batch is one memcpy.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace trident::data {

inline void parallel_copy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kPiece = size_t{1} << 20;
  const auto pieces = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
  if (pieces < 4) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
  auto* out = static_cast<std::byte*>(dst);
  const auto* in = static_cast<const std::byte*>(src);
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < pieces; ++p) {
    const size_t at = static_cast<size_t>(p) * kPiece;
    std::memcpy(out + at, in + at, std::min(kPiece, bytes - at));
  }
}

}  // namespace trident::data
