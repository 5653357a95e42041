// The one reading of a sliding-window op's parameters. Convolutions (conv2d, its backward ops,
// the fused CBR family, the inference epilogue) and poolings carry their geometry as string
// attributes — stride, padding, dilation, groups, kernel, count_include_pad; this file parses
// and validates them, and computes the output extents, once. Shape inference calls it, and
// every backend builds its own view (oneDNN dims, cuDNN's problem, the pooling kernels'
// geometry) from the `WindowGeom` it returns instead of re-reading the attributes.
#pragma once
#include <cstdint>
#include <string>

#include "core/shape.h"
#include "ir/attrs.h"

namespace trident::ops {

// An [h, w] pair of sizes.
struct Pair {
  int64_t h = 0;
  int64_t w = 0;
  bool operator==(const Pair&) const = default;
};

// A window's parameters as the attributes give them; `kernel` is the pooling window, or for a
// convolution the weight's spatial extent [R, S].
struct Window {
  Pair kernel{1, 1}, stride{1, 1}, pad{0, 0}, dil{1, 1};
  int64_t groups = 1;
  bool count_include_pad = true;  // average pooling only
  // Max pooling only: the output extent rounds up (ONNX's and PyTorch's ceil_mode), so a last
  // window may hang over the bottom or right edge; it must still start inside the input or its
  // left padding. Kernels clamp windows to the input, so they need no other change.
  bool ceil_mode = false;

  // Output extent for an input extent; throws one sentence when the window does not fit.
  Pair output(Pair input) const;
};

// stride / padding / dilation / groups of a convolution whose weight has spatial extent
// `kernel`. Throws one sentence naming the attribute that is malformed.
Window conv_window(const ir::Attrs& a, Pair kernel);
// kernel / stride (the kernel when absent) / padding / count_include_pad / ceil_mode of a pooling.
Window pool_window(const ir::Attrs& a);

// The window attributes of a convolution / pooling node alone, for the nodes that a backward
// rule or a decomposition derives from it.
ir::Attrs conv_window_attrs(const ir::Attrs& a);
ir::Attrs pool_window_attrs(const ir::Attrs& a);

// Sizes of a sliding-window op over NHWC tensors: x [N,H,W,C] → y [N,P,Q,K], with its window.
// For pooling K == C, R×S is the window and groups == 1.
struct WindowGeom : Window {
  int64_t N = 0, H = 0, W = 0, C = 0;  // input
  int64_t P = 0, Q = 0, K = 0;         // output
  int64_t R = 0, S = 0;                // window (filter) extent, = kernel
  int64_t Cg = 0, Kg = 0;              // channels per group, input and output side
};

// Output shape of a convolution of x [N,H,W,C] with w [K,R,S,C/groups]; validates both.
Shape conv_output_shape(const ir::Attrs& a, const Shape& x, const Shape& w);
// Output shape of a pooling of x [N,H,W,C].
Shape pool_output_shape(const ir::Attrs& a, const Shape& x);

// The geometry of a convolution from its x, weight and y shapes, checked against each other and
// the attributes (the sentences carry no node name: callers prefix it).
WindowGeom conv_geometry(const ir::Attrs& a, const Shape& x, const Shape& w, const Shape& y);
// The geometry of a pooling from its x and y shapes.
WindowGeom pool_geometry(const ir::Attrs& a, const Shape& x, const Shape& y);

}  // namespace trident::ops
