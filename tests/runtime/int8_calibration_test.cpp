// The int8 calibrators: the histogram keeps every value as its range doubles, max is the largest
// |x|, percentile leaves 0.01 % above it, and entropy cuts a long tail of rare outliers that max
// would keep (so the common values get finer steps) but keeps a distribution without outliers whole.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "runtime/int8_calibration.h"

using namespace trident;
using runtime::ActivationHistogram;
using runtime::Calibrator;

namespace {

double total(const ActivationHistogram& h) { return std::accumulate(h.counts().begin(), h.counts().end(), 0.0); }

TEST(Int8Calibration, TheHistogramKeepsEveryValueAsItsRangeDoubles) {
  ActivationHistogram h;
  const std::vector<float> small{0.1f, 0.2f, 0.3f}, large{-5.0f, 1.0f, 40.0f, 0.0f};
  h.add(small.data(), 3);
  EXPECT_TRUE(h.non_negative());
  h.add(large.data(), 4);
  EXPECT_FALSE(h.non_negative());
  EXPECT_EQ(total(h), 7.0);
  EXPECT_DOUBLE_EQ(h.absmax(), 40.0);
  EXPECT_GT(h.range(), 40.0);
  EXPECT_DOUBLE_EQ(h.threshold(Calibrator::max), 40.0);
}

TEST(Int8Calibration, AllZeroInputsHaveNoThreshold) {
  ActivationHistogram h;
  const std::vector<float> zeros(100, 0.0f);
  h.add(zeros.data(), 100);
  EXPECT_EQ(h.threshold(Calibrator::entropy), 0.0);
  EXPECT_EQ(h.threshold(Calibrator::max), 0.0);
}

// |N(0, 1)| with a few outliers at 50: entropy and percentile cut the tail, max keeps it.
TEST(Int8Calibration, EntropyAndPercentileCutRareOutliers) {
  Rng rng(7);
  std::vector<float> x(200000);
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (int i = 0; i < 5; ++i) x[static_cast<size_t>(i) * 1000] = 50.0f;
  ActivationHistogram h;
  h.add(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_DOUBLE_EQ(h.threshold(Calibrator::max), 50.0);
  const double entropy = h.threshold(Calibrator::entropy), percentile = h.threshold(Calibrator::percentile);
  EXPECT_GT(entropy, 2.0);
  EXPECT_LT(entropy, 20.0);
  EXPECT_GT(percentile, 3.0);
  EXPECT_LT(percentile, 5.5);
}

// A uniform distribution has no tail to cut: entropy keeps (nearly) all of it.
TEST(Int8Calibration, EntropyKeepsAUniformRangeWhole) {
  Rng rng(3);
  std::vector<float> x(100000);
  for (float& v : x) v = static_cast<float>(rng.uniform(0, 8));
  ActivationHistogram h;
  h.add(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_TRUE(h.non_negative());
  EXPECT_GT(h.threshold(Calibrator::entropy), 7.0);
  EXPECT_LE(h.threshold(Calibrator::entropy), 8.0);
}

TEST(Int8Calibration, CalibratorNamesParseOrSaySo) {
  EXPECT_EQ(runtime::parse_calibrator("entropy"), Calibrator::entropy);
  EXPECT_EQ(runtime::parse_calibrator("percentile"), Calibrator::percentile);
  EXPECT_EQ(runtime::parse_calibrator("max"), Calibrator::max);
  try {
    runtime::parse_calibrator("minmax");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("entropy, percentile or max"), std::string::npos) << e.what();
  }
}

}  // namespace
