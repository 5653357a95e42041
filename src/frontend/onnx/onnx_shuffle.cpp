// ShuffleNet's channel shuffle as PyTorch exports it — Reshape [N,C,H,W] → [N,g,C/g,H,W],
// Transpose(perm 0,2,1,3,4), Reshape → [N,C,H,W] — read as one channel_shuffle node: the
// 5-D views never exist in trident (it has no 5-D tensors), they are remembered by name until
// the second Reshape closes the pattern. Any other reader of a view is refused (onnx_import.cpp).
#include "frontend/onnx/onnx_detail.h"

namespace trident::frontend::onnx_detail {

namespace {

// The ONNX dims [N, C, H, W] of a trident NHWC activation.
Shape onnx_dims(const Shape& nhwc) { return {nhwc[0], nhwc[3], nhwc[1], nhwc[2]}; }

// `want` read through a Reshape's shape rules: entries equal, 0 copying the input extent at
// the same index (only where the input has one), one −1 standing for whatever the rest leaves.
bool reshape_gives(const std::vector<int64_t>& spec, const Shape& input, const Shape& want) {
  if (spec.size() != want.size()) return false;
  int inferred = 0;
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i] == -1) ++inferred;
    else if (spec[i] == 0 ? (i >= input.size() || input[i] != want[i]) : spec[i] != want[i]) return false;
  }
  return inferred <= 1;
}

}  // namespace

// A view's shape as the trace wrote it, its batch the one being compiled: the dynamo exporter
// writes the trace's fixed batch into every view.
std::vector<int64_t> Importer::batch_of(std::vector<int64_t> spec, int64_t batch) const {
  if (!spec.empty() && spec[0] == model_batch_) spec[0] = batch;
  return spec;
}

bool Importer::reshape_for_shuffle(const onnx::NodeProto& n) {
  const std::string& in = n.input(0);
  const auto transposed = shuffle_transposed_.find(in);
  if (transposed == shuffle_transposed_.end()) {
    const auto v = values_.find(in);
    if (v == values_.end() || !is_const(n.input(1))) return false;
    const Const& s = constant_of(n, 1);
    const Shape xs = out_.graph.value(v->second).shape;
    if (s.is_float || s.dims.size() != 1 || s.i.size() != 5 || xs.size() != 4) return false;
    const Shape d = onnx_dims(xs);
    const int64_t g = s.i[1];
    if (g < 1 || g > d[1] || d[1] % g != 0 || !reshape_gives(batch_of(s.i, d[0]), d, {d[0], g, d[1] / g, d[2], d[3]}))
      fail(n, "reshape of " + shape_str(d) + " to " + shape_str(s.i) +
                  " is not the [N, groups, C/groups, H, W] view of a channel shuffle, the only 5-D reshape supported");
    shuffle_split_[n.output(0)] = {v->second, g};
    return true;
  }
  const Const& s = constant_of(n, 1);
  const ShuffleView view = transposed->second;
  const Shape d = onnx_dims(out_.graph.value(view.x).shape);
  const Shape five{d[0], d[1] / view.groups, view.groups, d[2], d[3]};
  if (s.is_float || s.dims.size() != 1 || !reshape_gives(batch_of(s.i, d[0]), five, d))
    fail(n, "reshape of the transposed channel-shuffle view " + shape_str(five) + " to " + shape_str(s.i) +
                " does not close the shuffle (it must give " + shape_str(d) + ")");
  emit(n, "channel_shuffle", {view.x}, {{"groups", view.groups}});
  return true;
}

void Importer::transpose(const onnx::NodeProto& n) {
  allow_attrs(n, {"perm"});
  expect_io(n, 1, 1, 1);
  if (is_const(n.input(0))) return fold_transpose(n);  // a weight the exporter left untransposed
  if (transpose_channels_last(n)) return;  // ConvNeXt's permutes (onnx_layernorm.cpp)
  const auto split = shuffle_split_.find(n.input(0));
  if (split == shuffle_split_.end())
    fail(n, "Transpose is supported only as the middle of a channel shuffle (Reshape [N,g,C/g,H,W] → Transpose(0,2,1,3,4) "
            "→ Reshape [N,C,H,W]) and as the channels-last permutes (0,2,3,1) and (0,3,1,2) of a 4-D activation");
  if (attr_ints(n, "perm") != std::vector<int64_t>{0, 2, 1, 3, 4})
    fail(n, "perm " + shape_str(attr_ints(n, "perm")) + " is not a channel shuffle's (0,2,1,3,4)");
  shuffle_transposed_[n.output(0)] = split->second;
}

}  // namespace trident::frontend::onnx_detail
