// Op cases of pad2d, channel_slice (ONNX Pad, Slice and Split) and resize_channels: exact, since they only move
// values (Measure::Rounded: the same value once rounded to the case's dtype). pad2d pads,
// crops, and does both at once, with zero and non-zero values, over channel counts that fill
// 16-byte vectors in every dtype and over odd ones; channel_slice cuts windows at vector and
// odd offsets, places a slice back into wider zeros (its own backward), straddles an edge,
// and runs on a 2-D [N, features] tensor; on cuda, misaligned tensors take the narrow units.
#include "support/op_cases/family.h"

namespace trident::test_support::op_family {
namespace {

using ir::Attrs;

OpCase exact(std::string name, std::function<ir::Graph(DType)> build, uint64_t seed, int64_t misalign = 0) {
  OpCase c = scaled_case(std::move(name) + (misalign ? "_misaligned" + std::to_string(misalign) : ""),
                         std::move(build), seed, kAllFloat);
  c.measure = Measure::Rounded;
  c.misalign = misalign;
  if (misalign) c.backends = {"cuda"};  // alignment is a property of device memory
  return c;
}

std::string pads_tag(const std::vector<int64_t>& p) {
  std::string out;
  for (int64_t v : p) out += (out.empty() ? "" : "_") + (v < 0 ? "m" + std::to_string(-v) : std::to_string(v));
  return out;
}

}  // namespace

void add_pad_slice_cases(std::vector<OpCase>& cases) {
  struct Pad {
    Shape x;
    std::vector<int64_t> pads;  // top, left, bottom, right
    double value;
  };
  const Pad pads[] = {{{2, 5, 7, 3}, {1, 2, 0, 3}, 0.0},    {{2, 4, 4, 8}, {2, 1, 2, 1}, -1.5},
                      {{1, 6, 5, 16}, {-1, 0, -2, -1}, 0.0}, {{2, 5, 6, 5}, {1, -2, -1, 2}, 0.25},
                      {{3, 3, 3, 4}, {0, 0, 0, 1}, 2.0}};
  for (const Pad& p : pads) {
    const Shape xs = p.x;
    const Attrs a{{"pads", p.pads}, {"value", p.value}};
    for (int64_t misalign : {int64_t{0}, int64_t{1}})
      cases.push_back(exact(
          "pad2d_" + tag(xs) + "_" + pads_tag(p.pads),
          [=](DType d) {
            ir::Graph g;
            g.add_node1("pad2d", {g.add_input("x", xs, d)}, a, "y");
            return g;
          },
          41, misalign));
  }
  struct Slice {
    Shape x;
    int64_t start, channels;
  };
  const Slice slices[] = {{{2, 3, 4, 16}, 0, 8},  {{2, 3, 4, 16}, 8, 8},    {{2, 3, 4, 12}, 3, 5},
                          {{2, 3, 4, 8}, -8, 16}, {{2, 3, 4, 6}, -2, 5},    {{2, 3, 4, 6}, 4, 5},
                          {{3, 1001}, 500, 400},  {{1, 2, 2, 24}, -24, 48}, {{2, 2, 3, 7}, -3, 13}};
  for (const Slice& s : slices) {
    const Shape xs = s.x;
    const Attrs a{{"start", s.start}, {"channels", s.channels}};
    for (int64_t misalign : {int64_t{0}, int64_t{1}})
      cases.push_back(exact(
          "channel_slice_" + tag(xs) + "_from" + (s.start < 0 ? "m" + std::to_string(-s.start) : std::to_string(s.start)) +
              "_" + std::to_string(s.channels),
          [=](DType d) {
            ir::Graph g;
            g.add_node1("channel_slice", {g.add_input("x", xs, d)}, a, "y");
            return g;
          },
          42, misalign));
  }
  // resize_channels (pad_channels' op, and its own backward): grows with zeros to a 16-byte
  // vector's width, shrinks back, and resizes a 2-D [N, features] tensor and OHWI weights.
  const std::pair<Shape, int64_t> resizes[] = {{{2, 3, 3, 5}, 8}, {{2, 3, 3, 8}, 5}, {{3, 7}, 16}, {{8, 3, 3, 3}, 4}};
  for (const auto& [shape, channels] : resizes) {
    const Shape xs = shape;
    const Attrs a{{"channels", channels}};
    cases.push_back(exact("resize_channels_" + tag(xs) + "_to" + std::to_string(channels),
                          [=](DType d) {
                            ir::Graph g;
                            g.add_node1("resize_channels", {g.add_input("x", xs, d)}, a, "y");
                            return g;
                          },
                          43));
  }
}

}  // namespace trident::test_support::op_family
