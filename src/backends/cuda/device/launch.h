// What the host launchers of the cuda backend's hand-written kernels share: the storage
// dtypes they accept (ElemType, mapped from trident::DType) and the grid sizing of
// grid-stride loops. Plain C++ so that the kernel classes (.cpp, g++) and the device code
// (.cu, nvcc) include the same declarations.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "core/dtype.h"

namespace trident::cuda::device {

// Floating storage types of activations, parameters and statistics on the GPU.
enum class ElemType : int { f32 = 0, f16 = 1, bf16 = 2 };

// The ElemType of `t`, or nothing when the GPU kernels do not handle it (f64, i32).
inline std::optional<ElemType> elem_type(DType t) {
  switch (t) {
    case DType::f32: return ElemType::f32;
    case DType::f16: return ElemType::f16;
    case DType::bf16: return ElemType::bf16;
    default: return std::nullopt;
  }
}

inline constexpr int kThreads = 256;  // block size of the 1-D element-wise kernels
// Grid-stride kernels never need more blocks than this to fill an H200 (132 SMs × 16 blocks).
inline constexpr int64_t kMaxBlocks = 132 * 16;

// Blocks of `threads` threads for a grid-stride loop over `n` items (at least one block, so a
// launch over zero items is still a valid configuration; callers skip those anyway).
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t want = (std::max<int64_t>(n, 1) + threads - 1) / threads;
  return static_cast<unsigned>(std::min(want, kMaxBlocks));
}

}  // namespace trident::cuda::device
