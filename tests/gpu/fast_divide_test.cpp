// The multiply-and-shift division of the pooling gathers and the small-channel convolutions
// (device/fast_divide.h) against the integer division, on the host (the device runs the same
// formula with __umulhi): every divisor below 4,100, the powers of two and their neighbours,
// divisors near 2^32 and the shapes' own P·Q and Q, each at the quotient's edges and at random
// 32-bit numerators. Needs no GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backends/cuda/device/fast_divide.h"

namespace trident {
namespace {

using cuda::device::FastDivider;

constexpr uint64_t kLimit = uint64_t{1} << 32;

void expect_exact(uint32_t d, std::mt19937& rng) {
  const FastDivider f(d);
  auto check = [&](uint64_t n) {
    if (n >= kLimit) return;
    ASSERT_EQ(f.quotient(static_cast<uint32_t>(n)), static_cast<uint32_t>(n / d)) << n << " / " << d;
  };
  for (uint64_t n = 0; n < 64; ++n) check(n);
  for (uint64_t q : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{1000}, (kLimit - 1) / d}) {
    check(q * d - 1);
    check(q * d);
    check(q * d + 1);
  }
  check(kLimit - 1);
  std::uniform_int_distribution<uint32_t> any(0, UINT32_MAX);
  for (int i = 0; i < 200; ++i) check(any(rng));
}

TEST(FastDivider, MatchesIntegerDivisionOverAll32BitValues) {
  std::mt19937 rng(7);
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d < 4100; ++d) divisors.push_back(d);
  for (int k = 0; k < 32; ++k) {
    divisors.push_back(uint32_t{1} << k);
    if (k > 1) {
      divisors.push_back((uint32_t{1} << k) + 1);
      divisors.push_back((uint32_t{1} << k) - 1);
    }
  }
  for (uint32_t d : {224u * 224u, 112u * 112u, 56u * 56u, 7u * 7u, 150528u, 1000003u, UINT32_MAX, UINT32_MAX - 1})
    divisors.push_back(d);
  std::uniform_int_distribution<uint32_t> any(1, UINT32_MAX);
  for (int i = 0; i < 2000; ++i) divisors.push_back(any(rng));
  for (uint32_t d : divisors) {
    expect_exact(d, rng);
    if (HasFatalFailure()) return;
  }
}

TEST(FastDivider, DefaultDividesByOne) {
  const FastDivider f;
  for (uint32_t n : {0u, 1u, 12345u, UINT32_MAX}) EXPECT_EQ(f.quotient(n), n);
}

}  // namespace
}  // namespace trident
