// Division of 32-bit unsigned values by a divisor fixed on the host: a multiply-high, an add
// and a shift instead of the tens of instructions of an emulated integer division (Granlund and
// Montgomery's method; exact for every 32-bit dividend and divisor, the add taken in 64 bits).
// The pooling gathers locate windows with it, and the small-channel convolutions split each
// tile row's pixel index into (image, row, column), where integer work, not memory, set the
// pace. Host tests run the same quotient() as the kernels.
#pragma once
#include <cstdint>

#include "ops/activation_math.h"  // TRIDENT_HOST_DEVICE

namespace trident::cuda::device {

struct FastDivider {
  uint32_t divisor = 1;
  uint32_t multiplier = 0;  // ⌊2^32·(2^shift − divisor) / divisor⌋ + 1
  uint32_t shift = 0;       // ⌈log2 divisor⌉
  FastDivider() = default;
  explicit FastDivider(uint32_t d) : divisor(d) {
    while ((uint64_t{1} << shift) < d) ++shift;
    multiplier = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  TRIDENT_HOST_DEVICE uint32_t quotient(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t high = __umulhi(n, multiplier);
#else
    const uint32_t high = static_cast<uint32_t>((static_cast<uint64_t>(n) * multiplier) >> 32);
#endif
    return static_cast<uint32_t>((static_cast<uint64_t>(high) + n) >> shift);
  }
};

}  // namespace trident::cuda::device
