// libFuzzer target for training checkpoints as `trident train --resume` reads them
// (load_checkpoint: the safetensors reader, then every metadata entry validated against the
// training flags' limits). Accepted metadata must lie in those limits. Seeds: corpus/checkpoint.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "memory_file.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/train_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trident::runtime;
  static trident::fuzz::MemoryFile file;
  try {
    const Checkpoint ck = load_checkpoint(file.hold(data, size));
    const CheckpointInfo& i = ck.info;
    const TrainConfig& c = i.config;
    if (!kEpochsLimit.allows(static_cast<double>(c.epochs)) || !kBatchLimit.allows(static_cast<double>(i.batch)) ||
        !kLrLimit.allows(c.lr) || !kMomentumLimit.allows(c.compile.momentum) ||
        !kWeightDecayLimit.allows(c.compile.weight_decay) || !kWarmupLimit.allows(c.warmup_epochs) || i.epoch < 0 ||
        i.epoch > c.epochs || i.step < 0 || i.train_images < 0)
      std::abort();
  } catch (const trident::Error&) {
    // A clean rejection is a correct outcome.
  }
  return 0;
}
