// The tensor-core instructions of trident's own convolution kernels (small_channel_conv.cu,
// cbr_weight_backward.cu): warp-wide mma.sync m16n8k16 with f16 or bf16 operands and f32
// accumulators, and ldmatrix to load its fragments from shared memory. mma.sync (sm_80 and
// later) rather than Hopper's wgmma: these kernels are bound by memory, not by the matrix
// units, and the warp-level form keeps them small and portable.
//
// Fragment layouts (g = lane / 4, t = lane % 4), as the PTX ISA gives them for m16n8k16:
//   A (16×16, row-major): a[0] = (row g, cols 2t, 2t+1), a[1] = (row g+8, same cols),
//                         a[2] = (row g, cols 2t+8, 2t+9), a[3] = (row g+8, those cols)
//   B (16×8, k × n):      b[0] = (rows 2t, 2t+1, col g), b[1] = (rows 2t+8, 2t+9, col g)
//   C (16×8, f32):        c[0], c[1] = (row g, cols 2t, 2t+1), c[2], c[3] = (row g+8, those cols)
// Each register holds two 16-bit values, the lower column (or row, for B) in the low half.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace trident::cuda::device::mma {

// d = a·b + d over one 16×8×16 tile; T is __half or __nv_bfloat16.
template <class T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, "f16 or bf16 operands");
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8×8 matrices of 16-bit values: lane l gives the address of row l % 8 of matrix l / 8
// (16 bytes, 16-byte aligned); r[j] receives matrix j's (row g, cols 2t, 2t+1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}
// The same with each matrix transposed: r[j] receives matrix j's (rows 2t, 2t+1, col g).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

// Two transposed 8×8 matrices: lanes 0-15 give the row addresses (lanes 16-31 are not read);
// r[j] receives matrix j's (rows 2t, 2t+1, col g) — one n-tile's B fragment.
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(row)));
}

}  // namespace trident::cuda::device::mma
