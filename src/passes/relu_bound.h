// Which clip nodes are bounded ReLUs (ONNX Clip(0, m); ReLU6 is m = 6): the fusion passes that
// treat such a clip as a relu with an upper bound (relu_max) ask here, so they agree on it.
#pragma once
#include <cmath>

#include "ir/graph.h"

namespace trident::passes {

// The bound m of a clip(min 0, max m) with a finite positive m; 0 for any other node.
inline double relu_bound(const ir::Node& n) {
  if (n.op != "clip" || !n.attrs.has("min") || n.attrs.f("min") != 0.0 || !n.attrs.has("max")) return 0;
  const double max = n.attrs.f("max");
  return max > 0 && std::isfinite(max) ? max : 0;
}

}  // namespace trident::passes
