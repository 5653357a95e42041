// The int8 calibrators (runtime/int8_calibration.h): histograms of the convolution inputs over
// the calibration batches, and the saturation threshold each calibrator picks from them.
#include "runtime/int8_calibration.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "runtime/runner.h"

namespace trident::runtime {

Calibrator parse_calibrator(const std::string& name) {
  if (name == "entropy") return Calibrator::entropy;
  if (name == "percentile") return Calibrator::percentile;
  if (name == "max") return Calibrator::max;
  throw Error("unknown calibrator '" + name + "': choose entropy, percentile or max");
}

const char* calibrator_name(Calibrator c) {
  return c == Calibrator::entropy ? "entropy" : c == Calibrator::percentile ? "percentile" : "max";
}

void ActivationHistogram::add(const float* x, int64_t n) {
  double batch_max = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] < 0) negative_ = true;
    const double a = std::fabs(static_cast<double>(x[i]));
    if (a > batch_max && std::isfinite(a)) batch_max = a;
  }
  absmax_ = std::max(absmax_, batch_max);
  if (batch_max == 0 && range_ == 0) {  // all zeros so far: they count in the first bin
    counts_[0] += static_cast<double>(n);
    return;
  }
  if (range_ == 0) range_ = batch_max * 1.0001;
  // A batch beyond the range doubles it: bin pairs merge into the lower half.
  while (batch_max >= range_) {
    for (int b = 0; b < kBins / 2; ++b) counts_[b] = counts_[2 * b] + counts_[2 * b + 1];
    std::fill(counts_.begin() + kBins / 2, counts_.end(), 0.0);
    range_ *= 2;
  }
  const double per_bin = kBins / range_;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (!std::isfinite(a)) continue;
    counts_[std::min<int64_t>(kBins - 1, static_cast<int64_t>(a * per_bin))] += 1;
  }
}

double entropy_threshold(const std::vector<double>& counts, double bin_width, int levels) {
  const int bins = static_cast<int>(counts.size());
  int last = bins;
  while (last > 0 && counts[last - 1] == 0) --last;
  if (last <= levels) return last * bin_width;  // fewer occupied bins than steps: nothing to lose
  double best_kl = std::numeric_limits<double>::infinity();
  int best = last;
  std::vector<double> p, q;
  for (int i = levels; i <= last; ++i) {
    // P: the first i bins, everything beyond folded into the last; Q: P's first i bins merged
    // into `levels` steps and spread back evenly over the bins that were occupied.
    p.assign(counts.begin(), counts.begin() + i);
    for (int b = i; b < bins; ++b) p[i - 1] += counts[b];
    q.assign(i, 0.0);
    for (int j = 0; j < levels; ++j) {
      const int from = static_cast<int>(static_cast<int64_t>(j) * i / levels);
      const int to = static_cast<int>(static_cast<int64_t>(j + 1) * i / levels);
      double total = 0;
      int occupied = 0;
      for (int b = from; b < to; ++b) {
        total += counts[b];
        occupied += counts[b] > 0;
      }
      for (int b = from; b < to; ++b)
        if (counts[b] > 0) q[b] = total / occupied;
    }
    double p_sum = 0, q_sum = 0;
    for (int b = 0; b < i; ++b) p_sum += p[b], q_sum += q[b];
    if (p_sum <= 0 || q_sum <= 0) continue;
    double kl = 0;
    for (int b = 0; b < i; ++b) {
      if (p[b] <= 0) continue;
      const double pb = p[b] / p_sum, qb = std::max(q[b] / q_sum, 1e-12);
      kl += pb * std::log(pb / qb);
    }
    if (kl < best_kl) best_kl = kl, best = i;
  }
  return (best + 0.5) * bin_width;
}

double ActivationHistogram::threshold(Calibrator c) const {
  if (absmax_ <= 0) return 0;
  const double width = range_ / kBins;
  if (c == Calibrator::max) return absmax_;
  if (c == Calibrator::entropy)
    return std::min(absmax_, entropy_threshold(counts_, width, non_negative() ? 255 : 127));
  double total = 0;
  for (double v : counts_) total += v;
  const double want = total * 0.9999;
  double seen = 0;
  for (int b = 0; b < kBins; ++b) {
    seen += counts_[b];
    if (seen >= want) return std::min(absmax_, (b + 1) * width);
  }
  return absmax_;
}

CalibrationResult calibrate_int8(Runner& runner, const HostTensor& images, Calibrator c) {
  const Shape want = runner.input_shape(Layout::NCHW);
  const int64_t batch = runner.batch();
  if (images.shape.size() != want.size() || images.shape.empty() ||
      !std::equal(want.begin() + 1, want.end(), images.shape.begin() + 1))
    throw Error("the calibration images have shape " + shape_str(images.shape) + " but the model takes " +
                shape_str(want) + " (NCHW; any number of images)");
  const int64_t batches = images.shape[0] / batch;
  if (batches < 1)
    throw Error("the calibration images are " + std::to_string(images.shape[0]) + ", fewer than one batch of " +
                std::to_string(batch) + "; give at least that many (a few hundred is typical)");
  const HostTensor all = to_f32(images, "the calibration images");
  const size_t batch_bytes = static_cast<size_t>(numel(want)) * sizeof(float);
  std::vector<ActivationHistogram> histograms(runner.num_outputs());
  HostTensor one{want, DType::f32, std::vector<std::byte>(batch_bytes)};
  for (int64_t b = 0; b < batches; ++b) {
    std::memcpy(one.data.data(), all.data.data() + static_cast<size_t>(b) * batch_bytes, batch_bytes);
    runner.set_input(one, Layout::NCHW, "calibration batch " + std::to_string(b + 1));
    runner.run();
    for (size_t i = 0; i < runner.num_outputs(); ++i) {
      const HostTensor v = runner.output(i, Layout::NHWC);
      if (v.dtype != DType::f32) continue;
      histograms[i].add(reinterpret_cast<const float*>(v.data.data()), numel(v.shape));
    }
  }
  CalibrationResult out;
  out.batches = batches;
  out.images = batches * batch;
  for (size_t i = 0; i < runner.num_outputs(); ++i)
    out.ranges[runner.output_name(i)] = {histograms[i].threshold(c), histograms[i].non_negative()};
  return out;
}

passes::CompileOptions calibrate_network(const std::function<ir::Graph(int64_t)>& model_at,
                                         const std::function<void(Runner&)>& load_weights,
                                         passes::CompileOptions compile, const BackendOptions& backend,
                                         const HostTensor& images, Calibrator c, CalibrationResult& measured) {
  if (images.shape.empty() || images.shape[0] < 1)
    throw Error("the calibration holds no images (shape " + shape_str(images.shape) + ")");
  passes::CompileOptions calibrate = compile;
  calibrate.int8.stage = passes::Int8Options::Stage::calibrate;
  // fuse_elementwise runs after quantize_int8 and gives the values it fuses new names: measured
  // without it, the ranges keep the names quantize_int8 looks them up by.
  calibrate.disabled_passes.push_back("fuse_elementwise");
  Runner runner(model_at(std::min<int64_t>(images.shape[0], kCalibrationBatch)), {calibrate, backend});
  load_weights(runner);
  measured = calibrate_int8(runner, images, c);
  compile.int8.stage = passes::Int8Options::Stage::quantize;
  compile.int8.ranges = measured.ranges;
  return compile;
}

}  // namespace trident::runtime
