// Dropout, as PyTorch trains it: each element zeroed with probability p and the others scaled
// by 1/(1 − p); an identity in inference. With per_sample = 1 it is torchvision's stochastic depth
// (StochasticDepth "row", EfficientNet's and ConvNeXt's drop path): one draw per sample zeroes or
// scales the sample's whole tensor. The model graph holds `dropout` (x → y, attribute p);
// training rewrites it (passes/seed_dropout.cpp) into a mask drawn from the run's random state
// and a mul, so the backward is mul's and the mask is the only thing saved; inference removes it.
#pragma once
#include <cstdint>

#include "ir/attrs.h"
#include "ops/dropout_math.h"

namespace trident::ops {

// The name of the training graph's random state: i32 [2], a key drawn from the run's seed and
// a step counter that rng_advance increments after every step. It is training state, not a
// model tensor: checkpoints carry it, state dicts and ONNX exports do not.
inline constexpr const char* kDropoutStateName = "dropout.rng";

// Parses and checks `p` (and `salt` where present); an Error names what is wrong.
DropoutParams dropout_params(const ir::Attrs& attrs);

}  // namespace trident::ops
