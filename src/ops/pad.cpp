// pad2d: rows and columns added around the height and width of an NHWC tensor, each cell of
// them attribute 'value' (ONNX Pad in constant mode, where no convolution or pooling after it
// can take the padding as its own; frontend/onnx/onnx_pad_slice.cpp). A negative count crops
// instead, so the backward is pad2d again: the gradient cropped back to the input by the
// negated counts (what the padding cells received is dropped; a crop's gradient is
// zero-padded back).
#include <cmath>

#include "ops/op_helpers.h"

namespace trident::ops {

namespace {

// Counts beyond this are refused: no image is that large, and extents stay far from overflow.
constexpr int64_t kMaxPad = int64_t{1} << 30;

// [top, left, bottom, right], each in [-kMaxPad, kMaxPad].
std::vector<int64_t> pads_of(const Node& n) {
  const std::vector<int64_t> p = n.attrs.has("pads") ? n.attrs.ints("pads") : std::vector<int64_t>{};
  if (p.size() != 4) throw Error("attribute 'pads' must hold 4 integers [top, left, bottom, right]");
  for (int64_t v : p)
    if (v < -kMaxPad || v > kMaxPad) throw Error("attribute 'pads' holds " + std::to_string(v) + ", out of range");
  return p;
}

}  // namespace

void register_pad_ops() {
  ir::OpDef pad = op_def("pad2d", {"x"}, {"y"},
                         "x [N,H,W,C] with pads [top, left, bottom, right] rows and columns of attribute 'value' "
                         "around H and W (negative counts crop)");
  pad.infer = [](const Node& n, const Graph& g) {
    const auto& x = in_value(g, n, 0);
    expect_rank(x, 4, "input");
    expect_float(x, "input");
    const std::vector<int64_t> p = pads_of(n);
    if (std::isnan(n.attrs.f("value", 0.0))) throw Error("attribute 'value' is NaN");
    const int64_t h = x.shape[1] + p[0] + p[2], w = x.shape[2] + p[1] + p[3];
    if (h <= 0 || w <= 0)
      throw Error("pads " + shape_str(p) + " crop all of the input's " + std::to_string(x.shape[1]) + "x" +
                  std::to_string(x.shape[2]) + " cells away");
    return std::vector<TypeInfo>{{{x.shape[0], h, w, x.shape[3]}, x.dtype}};
  };
  pad.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1};
    std::vector<int64_t> p = pads_of(n);
    for (int64_t& v : p) v = -v;
    return std::vector<int>{g.add_node1("pad2d", {dys[0]}, {{"pads", p}}, n.name + ".backward")};
  };
  ir::OpRegistry::add(pad);
}

}  // namespace trident::ops
