// How mul's second operand b spreads over a: the same shape, one value per channel [C] (a
// parameter scale), or one per sample and channel [N, 1, 1, C] (squeeze-excitation's gate).
// The op's shape check, its backward and every backend's kernel classify with this one
// function. Header-only.
#pragma once
#include "core/shape.h"

namespace trident::ops {

enum class MulBroadcast { none, same, channel, sample_channel };

inline MulBroadcast mul_broadcast(const Shape& a, const Shape& b) {
  if (a.empty()) return MulBroadcast::none;
  if (b == a) return MulBroadcast::same;
  if (b == Shape{a.back()}) return MulBroadcast::channel;
  if (a.size() == 4 && b == Shape{a[0], 1, 1, a[3]}) return MulBroadcast::sample_channel;
  return MulBroadcast::none;
}

}  // namespace trident::ops
