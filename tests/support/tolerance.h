// The one tolerance table of the test suite: |a - b| <= atol + rtol * |ref|, per dtype.
// Never widen a row to make a test pass without finding out why it failed.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace trident::test_support {

struct Tolerance {
  double atol, rtol;
};

inline Tolerance tolerance(DType t) {
  switch (t) {
    case DType::f64: return {1e-10, 1e-9};
    case DType::f32: return {1e-5, 1e-4};
    case DType::f16: return {1e-3, 1e-2};
    case DType::bf16: return {1e-2, 5e-2};
    default: return {0, 0};
  }
}

// One failure per element i < n where ok(i) is false, the first five described by describe(i)
// (a string): every comparison of the suite reports its mismatches this way.
template <class Ok, class Describe>
void expect_each(size_t n, Ok ok, Describe describe) {
  int reported = 0;
  for (size_t i = 0; i < n; ++i) {
    if (ok(i)) continue;
    ADD_FAILURE() << describe(i);
    if (++reported == 5) return;
  }
}

// The parts streamed into one string, numbers with every digit (as gtest prints them).
template <class... T>
std::string cat(const T&... parts) {
  std::ostringstream os;
  os.precision(17);
  (os << ... << parts);
  return os.str();
}

// "what[i]: got vs reference ref", what a mismatch says.
inline std::string mismatch(const std::string& what, size_t i, double got, double ref) {
  return cat(what, "[", i, "]: ", got, " vs reference ", ref);
}

inline void expect_close(const std::vector<double>& got, const std::vector<double>& ref, DType t,
                         const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const Tolerance tol = tolerance(t);
  expect_each(
      got.size(), [&](size_t i) { return std::abs(got[i] - ref[i]) <= tol.atol + tol.rtol * std::abs(ref[i]); },
      [&](size_t i) { return mismatch(what, i, got[i], ref[i]); });
}

}  // namespace trident::test_support
