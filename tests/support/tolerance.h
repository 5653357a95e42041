// The one tolerance table of the test suite: |a - b| <= atol + rtol * |ref|, per dtype.
// Never widen a row to make a test pass without finding out why it failed.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
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

inline void expect_close(const std::vector<double>& got, const std::vector<double>& ref, DType t,
                         const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const Tolerance tol = tolerance(t);
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - ref[i]) <= tol.atol + tol.rtol * std::abs(ref[i])) continue;
    ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs reference " << ref[i];
    if (++reported == 5) return;
  }
}

}  // namespace trident::test_support
