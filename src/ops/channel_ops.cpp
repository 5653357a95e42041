// Ops that move channels (the last axis) without computing. resize_channels: the last axis
// (channels in NHWC, input channels in OHWI) made `channels` long — zero-filled where it
// grows, cut where it shrinks. The pad_channels pass inserts it so the GPU's convolutions see
// channel counts that fill 16-byte vectors; its backward is the opposite resize, so the
// padding never reaches a gradient, a checkpoint or an output. channel_shuffle: ShuffleNet's
// interleaving of `groups` channel groups (view [g, C/g], transpose, flatten), whose backward
// is the shuffle with C/g groups. channel_slice: a contiguous range of the last axis (an ONNX
// Slice or Split on channels, and concat's backward); channels its window does not find in the
// input are zeros, so a negative start places a slice back into the full range: that is its
// own backward, and resize_channels is the slice that starts at 0.
#include "ops/op_helpers.h"

namespace trident::ops {

void register_channel_ops() {
  ir::OpDef resize = op_def("resize_channels", {"x"}, {"y"},
                            "the last axis resized to attribute 'channels' (zeros where it grows)");
  resize.infer = [](const Node& n, const Graph& g) {
    const auto& x = in_value(g, n, 0);
    expect_float(x, "input");
    if (x.shape.empty()) throw Error("resize_channels needs at least one axis");
    const int64_t c = n.attrs.i("channels", 0);
    if (c <= 0) throw Error("attribute 'channels' must be positive, got " + std::to_string(c));
    Shape s = x.shape;
    s.back() = c;
    return std::vector<TypeInfo>{{s, x.dtype}};
  };
  resize.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1};
    const int64_t back = g.value(n.inputs[0]).shape.back();
    return std::vector<int>{g.add_node1("resize_channels", {dys[0]}, {{"channels", back}}, n.name + ".backward")};
  };
  ir::OpRegistry::add(resize);

  ir::OpDef shuffle = op_def("channel_shuffle", {"x"}, {"y"},
                             "output channel j·g + i is input channel i·(C/g) + j, g = attribute 'groups'");
  shuffle.infer = [](const Node& n, const Graph& g) {
    const auto& x = in_value(g, n, 0);
    expect_float(x, "input");
    if (x.shape.empty()) throw Error("channel_shuffle needs at least one axis");
    const int64_t groups = n.attrs.i("groups", 0), c = x.shape.back();
    if (groups < 1 || c % groups != 0)
      throw Error("attribute 'groups' (" + std::to_string(groups) + ") must divide the " + std::to_string(c) +
                  " channels");
    return std::vector<TypeInfo>{{x.shape, x.dtype}};
  };
  shuffle.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1};
    const int64_t back = g.value(n.inputs[0]).shape.back() / n.attrs.i("groups");
    return std::vector<int>{g.add_node1("channel_shuffle", {dys[0]}, {{"groups", back}}, n.name + ".backward")};
  };
  ir::OpRegistry::add(shuffle);

  ir::OpDef slice = op_def("channel_slice", {"x"}, {"y"},
                           "output channel c is input channel start + c, zeros where that is outside the input "
                           "(attributes 'start', 'channels')");
  slice.infer = [](const Node& n, const Graph& g) {
    const auto& x = in_value(g, n, 0);
    expect_float(x, "input");
    if (x.shape.empty()) throw Error("channel_slice needs at least one axis");
    const int64_t start = n.attrs.i("start", 0), c = n.attrs.i("channels", 0), cx = x.shape.back();
    if (c <= 0) throw Error("attribute 'channels' must be positive, got " + std::to_string(c));
    // The window [start, start + channels) must meet the input's [0, C): no output all zeros.
    if (start >= cx || start <= -c)
      throw Error("the window of " + std::to_string(c) + " channels from channel " + std::to_string(start) +
                  " misses all of the input's " + std::to_string(cx));
    Shape s = x.shape;
    s.back() = c;
    return std::vector<TypeInfo>{{s, x.dtype}};
  };
  slice.backward = [](Graph& g, const Node& n, const std::vector<int>& dys) {
    if (dys[0] < 0) return std::vector<int>{-1};
    const int64_t back = g.value(n.inputs[0]).shape.back();
    return std::vector<int>{g.add_node1("channel_slice", {dys[0]}, {{"start", -n.attrs.i("start", 0)}, {"channels", back}},
                                        n.name + ".backward")};
  };
  ir::OpRegistry::add(slice);
}

}  // namespace trident::ops
