// Pad, Split and Slice of a computed tensor's channels. Pad (constant mode, opsets 11–21: pads
// an initializer or a folded constant, the optional constant_value, the axes input from 18 on)
// pads H and W only. All-zero pads (torchvision's DenseNet writes one before each transition's
// AveragePool) are an identity; otherwise a pad2d node, which a Conv or pooling reading it
// alone may take as its own padding (absorb_pad, below). Slice of an activation is a
// channel_slice when it cuts only the channel axis (axis 1; other axes kept whole), with step
// 1 and constant bounds, folded shape arithmetic included (ShuffleNet v2's x.chunk(2, dim=1));
// Split on channels is one channel_slice per output (sizes an attribute before opset 13, an
// input from 13, or num_outputs from 18). Slice of a constant is shape arithmetic
// (onnx_shape_fold.cpp).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/printable.h"
#include "frontend/onnx/onnx_detail.h"

namespace trident::frontend::onnx_detail {

namespace {

constexpr const char* kAxisNames[] = {"N", "C", "H", "W"};

// ONNX's normalisation of an axis against a rank: negative counts from the end.
bool normalise_axis(int64_t& a, int64_t rank) {
  if (a < -rank || a >= rank) return false;
  if (a < 0) a += rank;
  return true;
}

std::string axis_name(int64_t axis, size_t rank) {
  return std::to_string(axis) + (rank == 4 ? std::string(" (") + kAxisNames[axis] + ")" : "");
}

}  // namespace

void Importer::pad(const onnx::NodeProto& n) {
  allow_attrs(n, {"mode"});
  expect_io(n, 2, 4, 1);
  const std::string mode = attr_string(n, "mode", "constant");
  if (mode != "constant")
    fail(n, "mode " + quoted_name(mode) + " is not supported: trident pads with a constant only (mode 'constant')");
  const int x = activation(n, 0);
  const Shape xs = out_.graph.value(x).shape;  // a copy: emit() adds values, which moves them all
  if (xs.size() != 4) fail(n, "input must be a 4-D [N,C,H,W] tensor");
  const Const& pads = constant_of(n, 1);
  if (pads.is_float || pads.dims.size() != 1) fail(n, "pads " + quoted_name(pads.name) + " must be a 1-D int64 tensor");
  std::vector<int64_t> axes{0, 1, 2, 3};
  if (has_input(n, 3)) {
    if (out_.opset < 18) fail(n, "has an axes input, which Pad takes from opset 18 on");
    const Const& a = constant_of(n, 3);
    if (a.is_float || a.dims.size() > 1) fail(n, "axes " + quoted_name(a.name) + " must be a 1-D integer tensor");
    axes = a.i;
    std::vector<bool> seen(4, false);
    for (int64_t& v : axes) {
      if (!normalise_axis(v, 4) || seen[static_cast<size_t>(v)])
        fail(n, "axes " + shape_str(a.i) + " are not distinct axes of a 4-D tensor");
      seen[static_cast<size_t>(v)] = true;
    }
  }
  if (pads.i.size() != 2 * axes.size())
    fail(n, "pads " + quoted_name(pads.name) + " holds " + std::to_string(pads.i.size()) + " values; expected " +
                std::to_string(2 * axes.size()) + " (a begin and an end per axis)");
  std::array<int64_t, 4> begin{}, end{};
  for (size_t k = 0; k < axes.size(); ++k) {
    begin[static_cast<size_t>(axes[k])] = pads.i[k];
    end[static_cast<size_t>(axes[k])] = pads.i[k + axes.size()];
  }
  for (size_t a = 0; a < 4; ++a) {
    if (std::max(std::abs(begin[a]), std::abs(end[a])) > kMaxAttrInt) fail(n, "pads hold an absurd value");
    if (a < 2 && (begin[a] != 0 || end[a] != 0))
      fail(n, "pads axis " + axis_name(static_cast<int64_t>(a), 4) +
                  "; trident pads only height and width (axes 2 and 3)");
  }
  double value = 0;
  if (has_input(n, 2)) {
    const Const& v = constant_of(n, 2);
    if (!v.is_float || v.numel() != 1) fail(n, "constant_value " + quoted_name(v.name) + " must be a float32 scalar");
    value = v.f[0];
    if (std::isnan(value)) fail(n, "constant_value " + quoted_name(v.name) + " is NaN");
  }
  if (begin == std::array<int64_t, 4>{} && end == std::array<int64_t, 4>{}) return define(n, 0, x);
  const std::vector<int64_t> hw{begin[2], begin[3], end[2], end[3]};
  const int y = emit(n, "pad2d", {x}, {{"pads", hw}, {"value", value}})[0];
  pending_pads_[y] = {out_.graph.value(y).producer, x, n.output(0), hw, value};
}

// Conv pads with zeros; pooling with −∞ (max) or not at all (average, count_include_pad = 0):
// a zero Pad in front is the op's own padding only where that reads the same values.
bool Importer::absorb_pad(const onnx::NodeProto& n, int& x, std::vector<int64_t>& pad,
                          const std::vector<int64_t>* kernel, bool max, int64_t* count_include_pad) {
  const auto it = pending_pads_.find(x);
  if (it == pending_pads_.end()) return false;
  const PendingPad p = it->second;
  // The Pad's output is read by this node alone, under its own name (not through an alias).
  if (n.input(0) != p.onnx_name || uses_[p.onnx_name] != 1) return false;
  const auto& hw = p.pads;  // top, left, bottom, right
  if (p.value != 0 || hw[0] != hw[2] || hw[1] != hw[3] || hw[0] < 0 || hw[1] < 0) return false;
  const std::vector<int64_t> total{pad[0] + hw[0], pad[1] + hw[1]};
  if (kernel) {  // a pooling: its padding is at most half its window
    if (total[0] * 2 > (*kernel)[0] || total[1] * 2 > (*kernel)[1]) return false;
    if (max) {
      // Max pooling's padding never wins; zeros do, unless every window holds a real cell at
      // least as large: true of a ReLU's output (≥ 0; each window of a padding ≤ half the window
      // meets the input, in floor mode), and the maxima only tie at 0, where the ReLU's
      // backward drops the gradient anyway. A Clip with a positive min never ties.
      const int producer = out_.graph.value(p.x).producer;
      const ir::Node* src = producer >= 0 ? &out_.graph.node(producer) : nullptr;
      const bool non_negative =
          src && (src->op == "relu" || (src->op == "clip" && src->attrs.f("min", -1.0) > 0));
      if (!non_negative || attr_int(n, "ceil_mode", 0) != 0) return false;
    } else {
      // Average pooling counts a padded zero (the Pad made it a real cell): its own padding
      // must count too, so it takes the Pad only when it has none or counts it already.
      if (*count_include_pad == 0 && (pad[0] != 0 || pad[1] != 0)) return false;
      *count_include_pad = 1;
    }
  }
  pad = total;
  x = p.x;
  out_.graph.remove_from_order({p.node});
  pending_pads_.erase(it);
  return true;
}

void Importer::channel_slice(const onnx::NodeProto& n) {
  const int x = activation(n, 0);
  const Shape xs = out_.graph.value(x).shape;  // a copy: emit() adds values, which moves them all
  const size_t rank = xs.size();
  const Shape dims = rank == 4 ? Shape{xs[0], xs[3], xs[1], xs[2]} : xs;  // ONNX's order
  const Const& starts = integer_const(n, 1, "starts");
  const Const& ends = integer_const(n, 2, "ends");
  const size_t count = starts.i.size();
  if (ends.i.size() != count || count == 0) fail(n, "starts and ends must hold one value per sliced axis");
  std::vector<int64_t> axes(count), steps(count, 1);
  for (size_t k = 0; k < count; ++k) axes[k] = static_cast<int64_t>(k);
  if (has_input(n, 3)) axes = integer_const(n, 3, "axes").i;
  if (has_input(n, 4)) steps = integer_const(n, 4, "steps").i;
  if (axes.size() != count || steps.size() != count) fail(n, "axes and steps must hold one value per sliced axis");
  int64_t b = 0, e = dims[1];
  std::vector<bool> seen(rank, false);
  for (size_t k = 0; k < count; ++k) {
    int64_t axis = axes[k];
    if (!normalise_axis(axis, static_cast<int64_t>(rank)) || seen[static_cast<size_t>(axis)])
      fail(n, "axes " + shape_str(axes) + " are not distinct axes of a rank-" + std::to_string(rank) + " tensor");
    seen[static_cast<size_t>(axis)] = true;
    const int64_t len = dims[static_cast<size_t>(axis)];
    // ONNX's clamping for step 1: negative from the end, then into [0, len] (ends may be INT64_MAX).
    auto clamp = [len](int64_t v) { return std::clamp<int64_t>(v < 0 ? (v < -len ? 0 : v + len) : v, 0, len); };
    const int64_t from = clamp(starts.i[k]), to = std::max(from, clamp(ends.i[k]));
    if (axis != 1) {
      if (steps[k] == 1 && from == 0 && to == len) continue;  // the whole axis: no slice
      fail(n, "slices axis " + axis_name(axis, rank) + "; trident slices only channels (axis 1)");
    }
    if (steps[k] != 1) fail(n, "slices channels with step " + std::to_string(steps[k]) + "; only step 1 is supported");
    b = from, e = to;
  }
  if (e <= b) fail(n, "its channel slice [" + std::to_string(b) + ", " + std::to_string(e) + ") is empty");
  if (b == 0 && e == dims[1]) return define(n, 0, x);
  emit(n, "channel_slice", {x}, {{"start", b}, {"channels", e - b}});
}

void Importer::split(const onnx::NodeProto& n) {
  allow_attrs(n, {"axis", "split", "num_outputs"});
  expect_io(n, 1, 2, n.output_size());
  const int x = activation(n, 0);
  const Shape xs = out_.graph.value(x).shape;  // a copy: emit() adds values, which moves them all
  const size_t rank = xs.size();
  int64_t axis = attr_int(n, "axis", 0);
  if (!normalise_axis(axis, static_cast<int64_t>(rank))) fail(n, "axis " + std::to_string(axis) + " is out of range");
  if (axis != 1) fail(n, "splits axis " + axis_name(axis, rank) + "; trident splits only channels (axis 1)");
  const int64_t C = xs.back(), outputs = n.output_size();
  std::vector<int64_t> sizes;
  const bool split_attr = attr(n, "split", onnx::AttributeProto::INTS) != nullptr;
  const auto* num = attr(n, "num_outputs", onnx::AttributeProto::INT);
  if (has_input(n, 1)) {
    if (out_.opset < 13) fail(n, "has a split input, which Split takes from opset 13 on (before: the attribute)");
    sizes = integer_const(n, 1, "split").i;
  } else if (split_attr) {
    if (out_.opset >= 13) fail(n, "has a split attribute, which is an input from opset 13 on");
    sizes = attr_ints(n, "split");
  } else if (num) {
    if (out_.opset < 18) fail(n, "has a num_outputs attribute, which Split takes from opset 18 on");
    if (num->i() != outputs) fail(n, "num_outputs " + std::to_string(num->i()) + " is not its output count");
    const int64_t chunk = (C + outputs - 1) / outputs;  // ONNX: the last chunk is the smaller one
    for (int64_t i = 0; i < outputs; ++i) sizes.push_back(std::min(chunk, C - i * chunk));
  } else {
    if (C % outputs != 0)
      fail(n, "splits " + std::to_string(C) + " channels into " + std::to_string(outputs) + " equal parts");
    sizes.assign(static_cast<size_t>(outputs), C / outputs);
  }
  if (static_cast<int64_t>(sizes.size()) != outputs)
    fail(n, "split " + shape_str(sizes) + " holds " + std::to_string(sizes.size()) + " sizes for " +
                std::to_string(outputs) + " outputs");
  int64_t sum = 0;
  for (int64_t s : sizes) {
    if (s <= 0 || s > C) fail(n, "split " + shape_str(sizes) + " holds a size that is not positive, or too large");
    sum += s;
  }
  if (sum != C) fail(n, "split " + shape_str(sizes) + " does not add up to the " + std::to_string(C) + " channels");
  if (outputs == 1) return define(n, 0, x);
  int64_t start = 0;
  for (int i = 0; i < n.output_size(); ++i) {
    const int64_t c = sizes[static_cast<size_t>(i)];
    if (has_output(n, i)) {
      int y = -1;
      try {
        y = out_.graph.add_node1("channel_slice", {x}, {{"start", start}, {"channels", c}},
                                 node_name(n) + "." + std::to_string(i));
      } catch (const Error& e) {
        fail(n, e.what());
      }
      out_.graph.value(y).name = n.output(i);
      define(n, i, y);
    }
    start += c;
  }
}

// SplitToSequence(x, split, axis 1) and SequenceAt(sequence, k): the dynamo exporter's
// x.chunk(2, dim=1) with optimize=False (ShuffleNet v2). The sequence is remembered by name with
// its chunks' channel ranges; each SequenceAt of a constant index is that chunk's channel_slice.
void Importer::split_to_sequence(const onnx::NodeProto& n) {
  allow_attrs(n, {"axis", "keepdims"});
  expect_io(n, 1, 2, 1);
  const int x = activation(n, 0);
  const Shape xs = out_.graph.value(x).shape;
  int64_t axis = attr_int(n, "axis", 0);
  if (!normalise_axis(axis, static_cast<int64_t>(xs.size()))) fail(n, "axis " + std::to_string(axis) + " is out of range");
  if (axis != 1) fail(n, "splits axis " + axis_name(axis, xs.size()) + "; trident splits only channels (axis 1)");
  if (!has_input(n, 1)) fail(n, "splits into single channels (no split input), which trident does not support");
  const Const& split = integer_const(n, 1, "split");
  const int64_t C = xs.back();
  std::vector<int64_t> sizes = split.i;
  if (split.dims.empty()) {  // one size: chunks of it, the last one what is left
    const int64_t chunk = split.i[0];
    if (chunk <= 0) fail(n, "split " + std::to_string(chunk) + " is not positive");
    sizes.clear();
    for (int64_t start = 0; start < C; start += chunk) sizes.push_back(std::min(chunk, C - start));
  }
  int64_t sum = 0;
  for (int64_t s : sizes) {
    if (s <= 0 || s > C) fail(n, "split " + shape_str(sizes) + " holds a size that is not positive, or too large");
    sum += s;
  }
  if (sum != C) fail(n, "split " + shape_str(sizes) + " does not add up to the " + std::to_string(C) + " channels");
  sequences_[n.output(0)] = {x, sizes};
}

void Importer::sequence_at(const onnx::NodeProto& n) {
  allow_attrs(n, {});
  expect_io(n, 2, 2, 1);
  const auto seq = sequences_.find(n.input(0));
  if (seq == sequences_.end()) fail(n, "reads " + quoted_name(n.input(0)) + ", which is no SplitToSequence of channels");
  const Const& index = integer_const(n, 1, "position");
  const int64_t count = static_cast<int64_t>(seq->second.sizes.size());
  int64_t k = index.i.size() == 1 ? index.i[0] : -count - 1;
  if (k < 0) k += count;
  if (k < 0 || k >= count) fail(n, "position " + shape_str(index.i) + " is not one of the " + std::to_string(count) + " chunks");
  int64_t start = 0;
  for (int64_t j = 0; j < k; ++j) start += seq->second.sizes[static_cast<size_t>(j)];
  emit(n, "channel_slice", {seq->second.x}, {{"start", start}, {"channels", seq->second.sizes[static_cast<size_t>(k)]}});
}

}  // namespace trident::frontend::onnx_detail
