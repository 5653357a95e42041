// Checked element and byte counts: the limit applies as the product accumulates, negative
// extents and overflowing sums are one Error naming the tensor.
#include <gtest/gtest.h>

#include "core/checked_math.h"
#include "support/error_of.h"

using namespace trident;
using test_support::error_of;

TEST(CheckedMath, CountsUpToTheLimitAreExact) {
  EXPECT_EQ(checked_numel({}, "t"), 1);
  EXPECT_EQ(checked_numel({3, 0, 5}, "t"), 0);
  EXPECT_EQ(checked_numel({int64_t{1} << 20, int64_t{1} << 20}, "t"), kMaxTensorElements);
  EXPECT_EQ(checked_bytes(kMaxTensorElements, 8, "t"), size_t{1} << 43);
}

TEST(CheckedMath, CountsThatWouldWrapAreRefusedNamingTheTensor) {
  // 2^22 * 2^21 * 2^21 is exactly 2^64: an unchecked product is 0.
  const std::string msg = error_of([] { checked_numel({int64_t{1} << 22, int64_t{1} << 21, int64_t{1} << 21}, "value 'y'"); });
  EXPECT_NE(msg.find("value 'y'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2^40"), std::string::npos) << msg;
  EXPECT_NE(error_of([] { checked_numel({(int64_t{1} << 40) + 1}, "t"); }), "");
  // A zero extent after huge ones: still refused, the limit applies while accumulating.
  EXPECT_NE(error_of([] { checked_numel({int64_t{1} << 41, 0}, "t"); }), "");
  EXPECT_NE(error_of([] { checked_numel({4, -2}, "value 'n'"); }).find("negative extent"), std::string::npos);
}

TEST(CheckedMath, OverflowingProductsAndSumsAreRefused) {
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31, "t"), int64_t{1} << 62);
  EXPECT_NE(error_of([] { checked_mul(int64_t{1} << 32, int64_t{1} << 31, "the plan"); }).find("the plan"),
            std::string::npos);
  EXPECT_NE(error_of([] { checked_add(SIZE_MAX, size_t{1}, "t"); }), "");
  EXPECT_NE(error_of([] { checked_add(INT64_MAX, int64_t{1}, "t"); }), "");
  EXPECT_NE(error_of([] { checked_bytes(int64_t{1} << 62, 8, "t"); }), "");
}
