// The allowed range of every training setting, in one table that both the command-line flags
// and the checkpoint reader check against, so a value refused on the command line cannot come
// in through a crafted checkpoint. NaN and infinity are outside every range.
#pragma once
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

namespace trident::runtime {

struct TrainLimit {
  const char* flag;  // the command-line flag, e.g. "--lr"
  const char* key;   // the checkpoint metadata entry, e.g. "lr"
  double min, max;
  bool min_exclusive = false;  // (min, max] rather than [min, max]
  bool max_exclusive = false;  // [min, max) rather than [min, max]

  bool allows(double v) const {
    return std::isfinite(v) && (min_exclusive ? v > min : v >= min) && (max_exclusive ? v < max : v <= max);
  }
  // "a finite number > 0", "a number from 0 to 1", ...
  std::string range() const {
    std::ostringstream os;
    os.precision(10);  // enough for every limit, short of 0.999999's binary tail
    if (max == std::numeric_limits<double>::max()) os << "a finite number " << (min_exclusive ? "> " : ">= ") << min;
    else
      os << "a number from " << min << (min_exclusive ? " (exclusive)" : "") << " to " << max
         << (max_exclusive ? " (exclusive)" : "");
    return os.str();
  }
};

inline constexpr double kUnbounded = std::numeric_limits<double>::max();
inline constexpr TrainLimit kEpochsLimit{"--epochs", "epochs", 1, 100000};
inline constexpr TrainLimit kBatchLimit{"--batch", "batch", 1, 65536};
inline constexpr TrainLimit kLrLimit{"--lr", "lr", 0, kUnbounded, true};
inline constexpr TrainLimit kMomentumLimit{"--momentum", "momentum", 0, 0.999999};
inline constexpr TrainLimit kWeightDecayLimit{"--weight-decay", "weight_decay", 0, 1};
inline constexpr TrainLimit kWarmupLimit{"--warmup", "warmup_epochs", 0, 1000};
inline constexpr TrainLimit kLabelSmoothingLimit{"--label-smoothing", "label_smoothing", 0, 0.99};
inline constexpr TrainLimit kLrGammaLimit{"--lr-gamma", "lr_gamma", 0, 1, true};
// AdamW (--optimizer adamw): the moments' decay rates and the denominator's epsilon.
inline constexpr TrainLimit kBeta1Limit{"--beta1", "beta1", 0, 1, false, true};
inline constexpr TrainLimit kBeta2Limit{"--beta2", "beta2", 0, 1, false, true};
inline constexpr TrainLimit kAdamEpsLimit{"--eps", "eps", 0, 1, true};

}  // namespace trident::runtime
