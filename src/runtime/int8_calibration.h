// Calibration for int8 inference: the range of every convolution input, measured on the
// user's images, from which passes/quantize_int8.cpp takes each input's scale. The network is
// compiled once with Int8Options::Stage::calibrate (those inputs become graph outputs), run on
// the calibration batches in f32, and each input's values are gathered into a histogram whose
// range doubles (pairs of bins merged) whenever a batch goes beyond it. The threshold above
// which values saturate is then chosen by one of TensorRT's calibrators:
//   entropy     the threshold whose int8 histogram loses least information (smallest KL
//               divergence from the f32 one), the default;
//   percentile  the 99.99th percentile of |x|;
//   max         the largest |x| seen (nothing saturates; coarse steps where outliers are).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/backend_options.h"
#include "core/host_tensor.h"
#include "passes/pass.h"

namespace trident::runtime {

class Runner;

enum class Calibrator { entropy, percentile, max };
// "entropy", "percentile" or "max"; an Error sentence naming the choices otherwise.
Calibrator parse_calibrator(const std::string& name);
const char* calibrator_name(Calibrator c);

// |x| (x itself where no value is negative) of one tensor over every batch.
class ActivationHistogram {
 public:
  static constexpr int kBins = 2048;
  void add(const float* x, int64_t n);
  bool non_negative() const { return !negative_; }
  double absmax() const { return absmax_; }
  double range() const { return range_; }  // the histogram spans [0, range)
  const std::vector<double>& counts() const { return counts_; }
  // The saturation threshold `c` chooses (0 where every value was 0).
  double threshold(Calibrator c) const;

 private:
  std::vector<double> counts_ = std::vector<double>(kBins, 0.0);
  double range_ = 0, absmax_ = 0;
  bool negative_ = false;
};

// The entropy calibrator on `counts` (kBins bins of width `bin_width` over |x|) for a grid of
// `levels` positive steps (127 signed, 255 unsigned): the threshold with the least KL divergence.
double entropy_threshold(const std::vector<double>& counts, double bin_width, int levels);

struct CalibrationResult {
  std::map<std::string, passes::Int8Options::Range> ranges;  // by input value name
  int64_t batches = 0, images = 0;
};

// Runs `runner` (compiled with the calibrate stage) on `images` (NCHW, as the runner's input,
// any number of images: whole batches of the runner's size are used) and measures every extra
// output. An Error where the images are fewer than one batch or of the wrong shape.
CalibrationResult calibrate_int8(Runner& runner, const HostTensor& images, Calibrator c);

// The batch a calibration runs at (its last partial batch is left out): fewer where the
// images are fewer. Inference-mode layers treat each image alone, so the ranges do not
// depend on it.
inline constexpr int64_t kCalibrationBatch = 32;

// What `trident infer --precision int8` and the API's Precision::int8 both do: the network
// `model_at(batch)` builds, compiled with `compile` (the inference run's options) at the
// calibrate stage on `backend`, given its weights by `load_weights`, run over `images`. Returns
// `compile` set to quantize with the ranges measured, and the result in `measured`.
passes::CompileOptions calibrate_network(const std::function<ir::Graph(int64_t)>& model_at,
                                         const std::function<void(Runner&)>& load_weights,
                                         passes::CompileOptions compile, const BackendOptions& backend,
                                         const HostTensor& images, Calibrator c, CalibrationResult& measured);

}  // namespace trident::runtime
