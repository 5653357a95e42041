// Internals of the ONNX importer shared by its files: bounded tensor and attribute readers
// over the protobuf classes, and the Importer that turns ONNX nodes into trident nodes.
// Every failure is a trident::Error naming the file, node, op type and opset.
#pragma once
#include <onnx/onnx_pb.h>

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_import.h"

namespace trident::frontend::onnx_detail {

// Bounds that keep a hostile file from asking for huge allocations or overflowing extents.
inline constexpr int64_t kMaxExtent = int64_t{1} << 24;           // one axis of any tensor
inline constexpr int64_t kMaxElements = int64_t{1} << 28;         // one activation (1 GiB f32)
inline constexpr int64_t kMaxAttrInt = int64_t{1} << 20;          // kernel, stride, pad values
inline constexpr size_t kMaxFileBytes = (size_t{1} << 31) - 1;    // protobuf's own 2 GiB limit

// A constant tensor in ONNX layout: an initializer or the output of a Constant node.
struct Const {
  std::string name;
  Shape dims;                  // ONNX dims (may hold zeros; scalars are empty)
  bool is_float = false;       // float data in f, else integer data in i
  std::vector<float> f;
  std::vector<int64_t> i;
  // Computed at import (shape arithmetic, Expand, CastLike), not data the file holds: the
  // dynamo exporter's zero bias of a bias-free convolution is such a tensor.
  bool derived = false;
  int onnx_type = 0;           // the TensorProto element type of integer data (int8, uint8, int32, int64...)
  int64_t numel() const { return is_float ? int64_t(f.size()) : int64_t(i.size()); }
};

// Reads the tensors an exporter keeps in files beside the model (TensorProto's external data:
// location, offset, length), confined to the model's folder: a location that is absolute,
// climbs out with "..", or resolves outside through a link is refused, and the range must lie
// inside the file. Built from an empty folder (a model given as bytes), it refuses every one.
// Every tensor reads its own bytes: together they may read no more of a file than it holds (a
// model whose initializers all name one range would otherwise make one file many copies), and
// with a budget each read is claimed from it first.
class ExternalData {
 public:
  explicit ExternalData(std::string folder, MemoryBudget* budget = nullptr)
      : folder_(std::move(folder)), budget_(budget) {}
  // The bytes of external tensor `t`, at most `max_bytes` of them; `what` names it in errors.
  std::string read(const onnx::TensorProto& t, uint64_t max_bytes, const std::string& what) const;

 private:
  std::string folder_;
  MemoryBudget* budget_;
  mutable std::map<std::string, uint64_t> read_;  // bytes read so far, by resolved file
};

// Converts a TensorProto (FLOAT, INT64 or INT32; inline data, or external data read through
// `external`), checking that the data holds exactly the declared element count before
// allocating. `where` prefixes errors.
Const read_tensor(const onnx::TensorProto& t, const std::string& where, const ExternalData& external);

class Importer {
 public:
  // `folder`: where the model's external data files are ("" for a model given as bytes).
  Importer(std::string label, const OnnxOptions& options, std::string folder = "")
      : label_(std::move(label)), options_(options), external_(std::move(folder), options.budget) {}
  OnnxImport run(const onnx::ModelProto& model);

 private:
  // ---- onnx_import.cpp: model level ----
  void read_opset(const onnx::ModelProto& model);
  void read_input(const onnx::GraphProto& graph);
  void convert(const onnx::NodeProto& node);
  void mark_outputs(const onnx::GraphProto& graph);

  // ---- onnx_ops.cpp: one converter per op type ----
  void conv(const onnx::NodeProto& n);
  void batchnorm(const onnx::NodeProto& n);
  void clip(const onnx::NodeProto& n);
  void pointwise(const onnx::NodeProto& n);  // Sigmoid, HardSigmoid, HardSwish: trident's activation
  void reduce_mean(const onnx::NodeProto& n);
  void pool(const onnx::NodeProto& n, bool max);
  void add(const onnx::NodeProto& n);
  void mul(const onnx::NodeProto& n);
  void flatten(const onnx::NodeProto& n);
  void reshape(const onnx::NodeProto& n);
  bool reshape_for_shuffle(const onnx::NodeProto& n);  // onnx_shuffle.cpp; false: not a shuffle's reshape
  // `spec` with its first entry `batch` where it is the traced model's batch.
  std::vector<int64_t> batch_of(std::vector<int64_t> spec, int64_t batch) const;
  void transpose(const onnx::NodeProto& n);            // onnx_shuffle.cpp
  void gemm(const onnx::NodeProto& n);
  void matmul(const onnx::NodeProto& n);
  void concat(const onnx::NodeProto& n);
  void constant(const onnx::NodeProto& n);
  void alias(const onnx::NodeProto& n);  // Identity; Dropout of an inference import
  void dropout(const onnx::NodeProto& n);  // Dropout: trident's dropout when training, else an alias
  // A dropout of probability p on `x` (training; per_sample: one draw per sample, stochastic
  // depth), or x itself (inference).
  void emit_dropout(const onnx::NodeProto& n, int x, double p, bool per_sample = false);
  // Training imports: the convolutions whose batch norm the exporter folded into their
  // weights, said in one notice (onnx_folded_bn.cpp).
  void notice_folded_batchnorm(const onnx::ModelProto& model);
  void unary(const onnx::NodeProto& n, const std::string& op);

  // ---- onnx_layernorm.cpp: ConvNeXt's ops, channels-last views, the exporters' composites ----
  void layer_normalization(const onnx::NodeProto& n);  // LayerNormalization over the last axis
  void gelu(const onnx::NodeProto& n);                 // Gelu (opset 20), exact or tanh
  // Transpose (0,2,3,1) of an [N,C,H,W] activation (a channels-last view) or (0,3,1,2) of such a
  // view (the activation again); false for any other Transpose of an activation.
  bool transpose_channels_last(const onnx::NodeProto& n);
  // Input i: its value, and whether the name is a channels-last view of it.
  int view_input(const onnx::NodeProto& n, int i, bool& channels_last) const;
  // Output i is `value`, or a channels-last view of it; named after the ONNX output.
  void define_view(const onnx::NodeProto& n, int i, int value, bool channels_last);
  int emit_layernorm(const onnx::NodeProto& n, int x, bool channels_last, const Const& gamma, const Const* beta,
                     double eps);
  bool reshape_to_flat(const onnx::NodeProto& n);   // Reshape(x, [-1]): remembered for gather_from_flat
  bool gather_from_flat(const onnx::NodeProto& n);  // the as_strided identity over such a flat view
  // GELU through Erf and LayerNorm as separate nodes (the TorchScript exporter's forms).
  // Dropout through RandomUniformLike (the dynamo exporter's form of an in-place dropout):
  //   RandomUniformLike → Less(·, 1−p) → Cast → Div(·, 1−p) → Mul(x, ·)   (or Mul, then Div)
  struct Composite {
    std::string kind;   // "gelu", "layernorm" or "dropout"
    std::string x;      // the ONNX name of its input
    std::string gamma, beta;
    double eps = 0;     // layernorm's epsilon; dropout's p
    std::string like;   // dropout: the tensor whose shape the draw takes (x's, or [N,1,1,1] per sample)
  };
  void find_composites(const onnx::GraphProto& graph);
  void convert_composite(const onnx::NodeProto& last, const Composite& c);
  // ---- onnx_quantize.cpp: QDQ models ----
  struct QuantParams {
    std::vector<float> scale;        // one, or one per index of `axis`
    std::vector<int64_t> zero_point;  // as many as scales
    int onnx_type = 0;               // UINT8, INT8 (or INT32 for a dequantized bias)
    int64_t axis = 1;
    // Elements between two steps of the axis in a tensor of `dims` (1 when per tensor).
    int64_t inner(const Shape& dims) const {
      int64_t v = 1;
      if (scale.size() > 1)
        for (size_t d = static_cast<size_t>(axis) + 1; d < dims.size(); ++d) v *= dims[d];
      return v;
    }
  };
  QuantParams quant_params(const onnx::NodeProto& n, int64_t data_rank) const;
  void quantize_linear(const onnx::NodeProto& n);    // of an activation: remembered; of a constant: folded
  void dequantize_linear(const onnx::NodeProto& n);  // a quantize_dequantize node, or a folded constant
  void notice_off_grid_weight(const onnx::NodeProto& n, const std::string& w);
  // ---- onnx_pad_slice.cpp: Pad, Split, and Slice of an activation's channels ----
  void pad(const onnx::NodeProto& n);
  void split(const onnx::NodeProto& n);
  void channel_slice(const onnx::NodeProto& n);  // Slice when its data is computed
  void split_to_sequence(const onnx::NodeProto& n);  // SplitToSequence of channels: remembered
  void sequence_at(const onnx::NodeProto& n);        // SequenceAt of such a sequence: a channel_slice
  // Where activation `x` is a pad2d that node `n` (a Conv, or a pooling of `kernel`) may take
  // as its own padding `pad`: removes the pad2d, adds its counts to `pad`, sets `x` to what
  // it padded (and count_include_pad to 1 for an average pooling) and returns true.
  bool absorb_pad(const onnx::NodeProto& n, int& x, std::vector<int64_t>& pad, const std::vector<int64_t>* kernel,
                  bool max, int64_t* count_include_pad);

  // ---- onnx_shape_fold.cpp: shape arithmetic evaluated at import ----
  void shape(const onnx::NodeProto& n);
  void gather(const onnx::NodeProto& n);
  void unsqueeze(const onnx::NodeProto& n);
  void slice(const onnx::NodeProto& n);
  void cast(const onnx::NodeProto& n);
  void fold_arithmetic(const onnx::NodeProto& n);  // Add, Sub, Mul, Div of integer constants
  void fold_concat(const onnx::NodeProto& n);      // Concat of 1-D integer constants
  void fold_reshape(const onnx::NodeProto& n);     // Reshape of a constant (the dynamo exporter's axes)
  void expand(const onnx::NodeProto& n);           // Expand of a constant (the dynamo exporter's zero biases)
  void constant_of_shape(const onnx::NodeProto& n);  // ConstantOfShape of a constant shape
  void fold_transpose(const onnx::NodeProto& n);   // Transpose of a constant (an unfolded Linear weight)
  void cast_like(const onnx::NodeProto& n);        // CastLike: a constant to its target's type
  void define_const(const onnx::NodeProto& n, Shape dims, std::vector<int64_t> values);
  // Input i as an integer constant of rank 0 or 1 (`what` names it in the sentence if not).
  const Const& integer_const(const onnx::NodeProto& n, int i, const char* what) const;

  // ---- helpers (onnx_import.cpp) ----
  [[noreturn]] void fail(const onnx::NodeProto& n, const std::string& what) const;
  std::string node_name(const onnx::NodeProto& n) const;
  void allow_attrs(const onnx::NodeProto& n, std::initializer_list<const char*> names) const;
  void expect_io(const onnx::NodeProto& n, int min_in, int max_in, int max_out) const;
  const onnx::AttributeProto* attr(const onnx::NodeProto& n, const char* name,
                                   onnx::AttributeProto::AttributeType type) const;
  int64_t attr_int(const onnx::NodeProto& n, const char* name, int64_t fallback) const;
  double attr_float(const onnx::NodeProto& n, const char* name, double fallback) const;
  std::string attr_string(const onnx::NodeProto& n, const char* name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const char* name) const;
  bool has_input(const onnx::NodeProto& n, int i) const;
  bool has_output(const onnx::NodeProto& n, int i) const;
  bool is_const(const std::string& name) const { return consts_.count(name) != 0; }
  const Const& constant_of(const onnx::NodeProto& n, int i) const;
  int activation(const onnx::NodeProto& n, int i) const;
  // Adds a trident node for ONNX node `n`; names and records its first outputs.
  std::vector<int> emit(const onnx::NodeProto& n, const std::string& op, std::vector<int> inputs,
                        ir::Attrs attrs, int onnx_outputs = 1);
  void define(const onnx::NodeProto& n, int i, int value);
  // A parameter (or state) tensor made from a constant, converted by `layout`; reused when
  // the same constant is read again with the same layout.
  int weight(const onnx::NodeProto& n, const Const& c, const std::string& layout, Shape shape,
             std::vector<float> data, bool state = false);

  std::string label_;
  OnnxOptions options_;
  ExternalData external_;
  OnnxImport out_;
  int64_t model_batch_ = 1;
  bool dropout_noticed_ = false, training_bn_noticed_ = false;
  std::map<std::string, Const> consts_;
  std::map<std::string, int> values_;  // ONNX tensor name -> trident value id
  std::map<std::string, std::pair<int, std::string>> weights_made_;  // name -> (value, layout)
  std::map<std::string, int> uses_;     // reads of each ONNX tensor by nodes and graph outputs
  std::map<int, int> bare_linear_;      // linear output value -> node id, made by MatMul
  // Flatten/Reshape of an [N,C,H,W] tensor with H·W > 1: trident flattens NHWC, so features
  // come in (h, w, c) order where ONNX has (c, h, w). Value -> (C, H, W); only a Gemm or MatMul
  // may read it, whose weight columns are permuted to match at import.
  std::map<int, std::array<int64_t, 3>> chw_flattened_;
  // The two 5-D views of a channel shuffle in progress (onnx_shuffle.cpp), by ONNX name: the
  // 4-D activation they view and the group count. They become one channel_shuffle node.
  struct ShuffleView {
    int x = -1;
    int64_t groups = 1;
  };
  std::map<std::string, ShuffleView> shuffle_split_, shuffle_transposed_;
  // Channels-last views ([N,H,W,C] in ONNX: the same NHWC tensor in trident) and 1-D flattens of
  // an activation, by ONNX name, with the activation they view (onnx_layernorm.cpp).
  std::map<std::string, int> channels_last_, flat_views_;
  // SplitToSequence of an activation's channels, by ONNX name: the activation and the chunk sizes.
  struct ChannelSequence {
    int x = -1;
    std::vector<int64_t> sizes;
  };
  std::map<std::string, ChannelSequence> sequences_;
  // The composites find_composites() recognised, by the index of their last node, and the
  // indices of their other nodes, which are not converted.
  std::map<int, Composite> composites_;
  std::set<int> inside_composite_;
  // pad2d nodes made from a Pad, by output value, until a Conv or pooling absorbs one.
  struct PendingPad {
    int node = -1, x = -1;      // the pad2d node and the activation it pads
    std::string onnx_name;      // the Pad's output
    std::vector<int64_t> pads;  // top, left, bottom, right
    double value = 0;
  };
  std::map<int, PendingPad> pending_pads_;
  // QuantizeLinear outputs of activations, by ONNX name, until their DequantizeLinear.
  struct Quantized {
    int x = -1;
    QuantParams params;
  };
  std::map<std::string, Quantized> quantized_;
  std::set<std::string> off_grid_weights_;  // dequantized weights trident's int8 grid would change
  bool off_grid_noticed_ = false;
  // `data` ([out, C·H·W] row-major, ONNX feature order) with its columns in trident's order
  // when `x` is such a flattened value; the layout name says which order a weight has.
  std::vector<float> match_flatten_order(const onnx::NodeProto& n, int x, std::vector<float> data, int64_t out_f,
                                         int64_t in_f, std::string& layout) const;
};

}  // namespace trident::frontend::onnx_detail
