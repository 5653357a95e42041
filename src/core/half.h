// IEEE binary16 (f16) and bfloat16 conversion on the host, bit-exact with the GPU's
// round-to-nearest-even conversions: used for AMP weight copies, test data and checkpoints.
#pragma once
#include <cstdint>
#include <cstring>

namespace trident {

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(man & 0x400u)) {
        man <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN / inf
  if (abs >= 0x477ff000u) return sign | 0x7c00u;                                  // overflow
  if (abs < 0x38800000u) {  // subnormal or zero in f16
    if (abs < 0x33000000u) return sign;
    const uint32_t e = abs >> 23, m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t drop = 126 - e;  // mantissa bits below the f16 subnormal's last place
    uint32_t h = m >> drop;
    const uint32_t rem = m & ((1u << drop) - 1), halfway = 1u << (drop - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return sign | static_cast<uint16_t>(h);
  }
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

inline float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace trident
