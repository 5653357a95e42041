// How an inference convolution runs on the cpu backend: which of oneDNN's implementations of
// the direct and the Winograd algorithms. oneDNN lists several per convolution (brgconv, jit,
// Winograd F(2,3) and F(4,3) ...) and its first is not always the fastest on a given shape, so
// each candidate is timed once per signature, as the GPU backend times cuDNN's plans.
#pragma once
#include <cstdint>
#include <string>

#include "backends/cpu/conv_setup.h"

namespace trident::cpu {

struct ConvPlan {
  CachedPrimitive p;
  std::string key;       // the primitive's cache key (also keys its reorders)
  bool blocked = false;  // Winograd: runs on blocked copies of the activations
  std::string note;      // for `trident explain`: the choice and every time; empty if untimed
};

// winograd: -1 a candidate when timed, 0 never, 1 only Winograd where oneDNN has it.
// autotune off: the first implementation oneDNN lists (of Winograd's, with winograd = 1).
// A Winograd implementation must beat the fastest direct one by 5 % to be chosen, so that
// results keep the direct convolution's rounding unless it buys something. Timing holds every
// candidate's tensors at once; where they would take more than `trial_bytes`, the last
// candidates are left out (Winograd's first), and with one left nothing is timed.
// With a `plan_cache_dir` (BackendOptions::plan_cache_dir), a choice timed on this machine
// before is taken from there untimed, and a new one is stored (plan_cache.h).
ConvPlan plan_inference_conv(const ConvSetup& s, const ConvPostOps& post, const std::string& key,
                             int winograd, bool autotune, uint64_t trial_bytes = UINT64_MAX,
                             const std::string& plan_cache_dir = "");

}  // namespace trident::cpu
