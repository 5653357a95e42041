// Dropout's random mask, written once for the host and the GPU: whether element `index` of a
// dropout is kept is a pure function of the run's random key, the step counter, the dropout's
// salt and the index (a counter-based generator, as Philox is for PyTorch's CUDA dropout), so
// every backend draws the same mask, a step needs no generator state beyond two words, and a
// resumed run draws what an uninterrupted one would. Header-only, no dependencies.
#pragma once
#include <stdint.h>

#include "core/host_device.h"

namespace trident::ops {

// The keep test compares 24 random bits with a threshold, so p is honoured to 2^-24.
inline constexpr int kDropoutBits = 24;

// A dropout's settings, parsed from its node once (ops/dropout.h: dropout_params).
struct DropoutParams {
  double p = 0;            // probability of zeroing an element, in [0, 1)
  uint32_t salt = 0;       // tells the dropouts of one graph apart (dropout_mask only)
  uint64_t group = 1;      // consecutive mask elements that share one draw (dropout_mask only)
  uint32_t threshold = 0;  // p·2^24 rounded: dropout_keeps' threshold
  double scale = 1;        // 1/(1 − p), the kept elements' factor
};

// SplitMix64's finaliser: every input bit reaches every output bit.
TRIDENT_HOST_DEVICE inline uint64_t dropout_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The per-step stream of one dropout: the state's two words (key, step counter) and the salt.
TRIDENT_HOST_DEVICE inline uint64_t dropout_stream(uint32_t key, uint32_t counter, uint32_t salt) {
  return dropout_mix((static_cast<uint64_t>(key) << 32 | counter) ^ dropout_mix(0x9E3779B97F4A7C15ull * (salt + 1ull)));
}

// True when draw `index` keeps its elements (element i of a mask is draw i / group);
// `threshold` is p·2^24 rounded.
TRIDENT_HOST_DEVICE inline bool dropout_keeps(uint64_t stream, uint64_t index, uint32_t threshold) {
  const uint64_t bits = dropout_mix(stream + 0x9E3779B97F4A7C15ull * (index + 1)) >> (64 - kDropoutBits);
  return bits >= threshold;
}

}  // namespace trident::ops
