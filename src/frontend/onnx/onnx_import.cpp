// ONNX import, model level: reads the file into a bounded buffer, parses the protobuf, checks
// the opset, creates the one NHWC input, converts the nodes in order and marks the outputs.
// Per-op conversion lives in onnx_ops.cpp.
#include "frontend/onnx/onnx_import.h"

#include <cstring>
#include <filesystem>
#include <set>

#include "core/checked_math.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/printable.h"
#include "core/input_file.h"
#include "frontend/onnx/onnx_detail.h"

namespace trident::frontend {

using namespace onnx_detail;

namespace {

// `folder`: where external data files are looked up ("" refuses them).
OnnxImport import_bytes(const void* data, size_t size, const OnnxOptions& options, const std::string& label,
                        const std::string& folder) {
  if (size > kMaxFileBytes) throw Error(label + ": larger than 2 GiB, the most ONNX protobuf allows");
  if (size == 0) throw Error(label + ": empty file, not an ONNX model");
  if (options.batch < 0 || options.batch > kMaxExtent)
    throw Error(label + ": batch " + std::to_string(options.batch) + " is out of range");
  onnx::ModelProto model;
  if (!model.ParseFromArray(data, static_cast<int>(size)))
    throw Error(label + ": not a valid ONNX model (the protobuf is truncated or corrupt)");
  return Importer(label, options, folder).run(model);
}

}  // namespace

OnnxImport import_onnx_from_memory(const void* data, size_t size, const OnnxOptions& options,
                                   const std::string& label) {
  return import_bytes(data, size, options, label, "");
}

OnnxImport import_onnx(const std::string& path, const OnnxOptions& options) {
  const InputFile f(path, "ONNX file");
  if (f.size() > kMaxFileBytes) throw Error(path + ": larger than 2 GiB, the most ONNX protobuf allows");
  const std::string bytes = f.read_all();
  const std::string folder = std::filesystem::path(path).parent_path().string();
  OnnxImport imp = import_bytes(bytes.data(), bytes.size(), options, path, folder.empty() ? "." : folder);
  imp.file_crc = crc32c(bytes.data(), bytes.size());
  return imp;
}

namespace onnx_detail {

OnnxImport Importer::run(const onnx::ModelProto& model) {
  read_opset(model);
  if (!model.has_graph()) throw Error(label_ + ": the model has no graph");
  const onnx::GraphProto& graph = model.graph();
  for (const auto& t : graph.initializer()) {
    if (t.name().empty()) throw Error(label_ + ": an initializer has no name");
    if (!consts_.emplace(t.name(), read_tensor(t, label_ + ": initializer ", external_)).second)
      throw Error(label_ + ": initializer " + quoted_name(t.name()) + " is defined twice");
  }
  if (graph.sparse_initializer_size() > 0) throw Error(label_ + ": sparse initializers are not supported");
  for (const auto& n : graph.node())
    for (const auto& in : n.input()) ++uses_[in];
  for (const auto& o : graph.output()) ++uses_[o.name()];
  read_input(graph);
  if (options_.train) notice_folded_batchnorm(model);
  find_composites(graph);
  for (int i = 0; i < graph.node_size(); ++i) {
    if (inside_composite_.count(i)) continue;
    const auto c = composites_.find(i);
    if (c != composites_.end()) convert_composite(graph.node(i), c->second);
    else convert(graph.node(i));
  }
  mark_outputs(graph);
  return std::move(out_);
}

void Importer::read_opset(const onnx::ModelProto& model) {
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") out_.opset = op.version();
  if (out_.opset == 0) throw Error(label_ + ": the model imports no default-domain opset");
  if (out_.opset < 11 || out_.opset > 21)
    throw Error(label_ + ": opset " + std::to_string(out_.opset) +
                " is not supported (trident reads opsets 11 to 21; PyTorch exports 13 to 18)");
}

void Importer::read_input(const onnx::GraphProto& graph) {
  const onnx::ValueInfoProto* input = nullptr;
  for (const auto& v : graph.input()) {
    if (is_const(v.name())) continue;  // older exporters list initializers as inputs
    if (input) throw Error(label_ + ": the model has more than one input (" + quoted_name(input->name()) + ", " + quoted_name(v.name()) + "); trident imports single-input networks");
    input = &v;
  }
  if (!input) throw Error(label_ + ": the model has no input");
  const std::string what = label_ + ": input " + quoted_name(input->name());
  if (!input->type().has_tensor_type()) throw Error(what + " is not a tensor");
  const auto& tt = input->type().tensor_type();
  if (tt.elem_type() != onnx::TensorProto::FLOAT)
    throw Error(what + " has element type " + std::to_string(tt.elem_type()) + "; trident needs float32");
  if (!tt.has_shape()) throw Error(what + " has no shape");
  Shape dims;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    int64_t v = d.has_dim_value() ? d.dim_value() : -1;
    if (i == 0) {
      model_batch_ = v > 0 ? v : 1;
      if (options_.batch > 0) v = options_.batch;
      else if (v < 0) v = 1;  // symbolic batch
    }
    if (v <= 0 || v > kMaxExtent)
      throw Error(what + " has a symbolic or invalid extent at axis " + std::to_string(i) + "; trident needs fixed sizes");
    dims.push_back(v);
  }
  int64_t n = 1;
  for (int64_t d : dims)  // d <= 2^24 and n <= 2^28 before each step: checked all the same
    if ((n = checked_mul(n, d, what)) > kMaxElements) throw Error(what + " is absurdly large");
  Shape shape;
  if (dims.size() == 4) shape = {dims[0], dims[2], dims[3], dims[1]};  // NCHW -> NHWC
  else if (dims.size() == 2) shape = dims;
  else throw Error(what + " has rank " + std::to_string(dims.size()) + "; trident imports [N,C,H,W] or [N,F] inputs");
  const int id = out_.graph.add_input(printable(input->name()), shape);
  values_[input->name()] = id;
  out_.input_name = input->name();
}

void Importer::mark_outputs(const onnx::GraphProto& graph) {
  if (graph.output_size() == 0) throw Error(label_ + ": the model has no output");
  std::set<int> seen;
  for (const auto& o : graph.output()) {
    auto it = values_.find(o.name());
    if (channels_last_.count(o.name()))
      throw Error(label_ + ": graph output " + quoted_name(o.name()) + " is a channels-last Transpose(0,2,3,1) view, "
                  "which trident keeps only inside a network (permute it back to [N,C,H,W])");
    if (it == values_.end())
      throw Error(label_ + ": graph output " + quoted_name(o.name()) + " is not produced by any supported node");
    ir::Value& v = out_.graph.value(it->second);
    if (v.role != ir::ValueRole::Activation)
      throw Error(label_ + ": graph output " + quoted_name(o.name()) + " is not computed by a node");
    if (chw_flattened_.count(v.id))
      throw Error(label_ + ": graph output " + quoted_name(o.name()) + " flattens [N,C,H,W] with H*W > 1, which trident "
                  "computes in NHWC order; only a Gemm or MatMul may read such a flatten");
    if (!seen.insert(v.id).second)
      throw Error(label_ + ": graph outputs alias one tensor (" + quoted_name(o.name()) + ")");
    v.name = printable(o.name());  // an Identity before the output keeps the caller's name findable
    out_.graph.mark_output(v.id);
    out_.output_names.push_back(printable(o.name()));
  }
}

void Importer::convert(const onnx::NodeProto& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    fail(n, "op domain " + quoted_name(n.domain()) + " is not supported");
  for (const auto& o : n.output())
    if (!o.empty() && (values_.count(o) || consts_.count(o)))
      fail(n, "output " + quoted_name(o) + " is defined twice");
  const std::string& t = n.op_type();
  if (t == "Conv") conv(n);
  else if (t == "BatchNormalization") batchnorm(n);
  else if (t == "Relu") unary(n, "relu");
  else if (t == "Clip") clip(n);
  else if (t == "Sigmoid" || t == "HardSigmoid" || t == "HardSwish") pointwise(n);
  else if (t == "MaxPool") pool(n, true);
  else if (t == "AveragePool") pool(n, false);
  else if (t == "GlobalAveragePool") unary(n, "global_avgpool");
  else if (t == "ReduceMean") reduce_mean(n);
  else if (t == "LayerNormalization") layer_normalization(n);
  else if (t == "Gelu") gelu(n);
  else if (t == "Shape") shape(n);
  else if (t == "Gather") gather(n);
  else if (t == "Unsqueeze") unsqueeze(n);
  else if (t == "Slice") slice(n);
  else if (t == "Split") split(n);
  else if (t == "SplitToSequence") split_to_sequence(n);
  else if (t == "SequenceAt") sequence_at(n);
  else if (t == "Pad") pad(n);
  else if (t == "Cast") cast(n);
  else if (t == "CastLike") cast_like(n);
  else if (t == "Expand") expand(n);
  else if (t == "ConstantOfShape") constant_of_shape(n);
  else if ((t == "Add" || t == "Mul" || t == "Sub" || t == "Div") && n.input_size() == 2 && is_const(n.input(0)) &&
           is_const(n.input(1)) && !constant_of(n, 0).is_float && !constant_of(n, 1).is_float) {
    allow_attrs(n, {});
    fold_arithmetic(n);
  } else if (t == "Sub" || t == "Div") fail(n, "is supported only on integer constants (shape arithmetic)");
  else if (t == "Add") add(n);
  else if (t == "Mul") mul(n);
  else if (t == "Flatten") flatten(n);
  else if (t == "Reshape") reshape(n);
  else if (t == "Transpose") transpose(n);
  else if (t == "Gemm") gemm(n);
  else if (t == "MatMul") matmul(n);
  else if (t == "Concat" && n.input_size() > 0 && is_const(n.input(0))) fold_concat(n);
  else if (t == "Concat") concat(n);
  else if (t == "Constant") constant(n);
  else if (t == "Identity") alias(n);
  else if (t == "QuantizeLinear") quantize_linear(n);
  else if (t == "DequantizeLinear") dequantize_linear(n);
  else if (t == "Dropout") dropout(n);
  else if (t == "RandomUniformLike" || t == "RandomUniform" || t == "RandomNormalLike" || t == "Bernoulli")
    fail(n, "op type is not supported by trident's ONNX importer; trident reads random numbers only in PyTorch's "
            "dropout (a Dropout node, or RandomUniformLike → Less → Cast → Div → Mul)");
  else fail(n, "op type is not supported by trident's ONNX importer");
}

// ---- helpers ----

// Printable (core/printable.h): it names the node in the IR and in every message after import.
std::string Importer::node_name(const onnx::NodeProto& n) const {
  return printable(n.name().empty() ? n.op_type() + "(" + (n.output_size() ? n.output(0) : "") + ")" : n.name());
}

void Importer::fail(const onnx::NodeProto& n, const std::string& what) const {
  throw Error(label_ + ": node '" + node_name(n) + "' (" + printable(n.op_type()) + ", opset " +
              std::to_string(out_.opset) + "): " + what);
}

void Importer::allow_attrs(const onnx::NodeProto& n, std::initializer_list<const char*> names) const {
  for (const auto& a : n.attribute()) {
    bool ok = false;
    for (const char* k : names) ok = ok || a.name() == k;
    if (!ok) fail(n, "attribute " + quoted_name(a.name()) + " is not supported");
  }
}

void Importer::expect_io(const onnx::NodeProto& n, int min_in, int max_in, int max_out) const {
  if (n.input_size() < min_in || n.input_size() > max_in)
    fail(n, "has " + std::to_string(n.input_size()) + " inputs; expected " + std::to_string(min_in) +
                (max_in != min_in ? " to " + std::to_string(max_in) : ""));
  if (n.output_size() < 1 || n.output(0).empty()) fail(n, "has no output");
  for (int i = max_out; i < n.output_size(); ++i)
    if (!n.output(i).empty() && uses_.count(n.output(i)))
      fail(n, "output " + std::to_string(i) + " (" + quoted_name(n.output(i)) + ") is read, which trident does not support");
}

const onnx::AttributeProto* Importer::attr(const onnx::NodeProto& n, const char* name,
                                           onnx::AttributeProto::AttributeType type) const {
  for (const auto& a : n.attribute()) {
    if (a.name() != name) continue;
    if (a.type() != type && a.type() != onnx::AttributeProto::UNDEFINED)
      fail(n, std::string("attribute '") + name + "' has the wrong type");
    if (!a.ref_attr_name().empty()) fail(n, std::string("attribute '") + name + "' is a reference");
    return &a;
  }
  return nullptr;
}

int64_t Importer::attr_int(const onnx::NodeProto& n, const char* name, int64_t fallback) const {
  const auto* a = attr(n, name, onnx::AttributeProto::INT);
  return a ? a->i() : fallback;
}

double Importer::attr_float(const onnx::NodeProto& n, const char* name, double fallback) const {
  const auto* a = attr(n, name, onnx::AttributeProto::FLOAT);
  return a ? a->f() : fallback;
}

std::string Importer::attr_string(const onnx::NodeProto& n, const char* name,
                                  const std::string& fallback) const {
  const auto* a = attr(n, name, onnx::AttributeProto::STRING);
  return a ? a->s() : fallback;
}

std::vector<int64_t> Importer::attr_ints(const onnx::NodeProto& n, const char* name) const {
  const auto* a = attr(n, name, onnx::AttributeProto::INTS);
  if (!a) return {};
  std::vector<int64_t> v(a->ints().begin(), a->ints().end());
  for (int64_t x : v)
    if (x < -kMaxAttrInt || x > kMaxAttrInt) fail(n, std::string("attribute '") + name + "' holds an absurd value");
  return v;
}

bool Importer::has_input(const onnx::NodeProto& n, int i) const {
  return i < n.input_size() && !n.input(i).empty();
}

bool Importer::has_output(const onnx::NodeProto& n, int i) const {
  return i < n.output_size() && !n.output(i).empty();
}

const Const& Importer::constant_of(const onnx::NodeProto& n, int i) const {
  if (!has_input(n, i)) fail(n, "input " + std::to_string(i) + " is missing");
  auto it = consts_.find(n.input(i));
  if (it == consts_.end()) {
    if (values_.count(n.input(i)))
      fail(n, "input " + quoted_name(n.input(i)) + " must be a constant (initializer), but it is computed");
    fail(n, "input " + quoted_name(n.input(i)) + " is neither an initializer nor an earlier node's output (missing initializer?)");
  }
  return it->second;
}

int Importer::activation(const onnx::NodeProto& n, int i) const {
  if (!has_input(n, i)) fail(n, "input " + std::to_string(i) + " is missing");
  auto it = values_.find(n.input(i));
  if (it == values_.end()) {
    if (shuffle_split_.count(n.input(i)) || shuffle_transposed_.count(n.input(i)))
      fail(n, "reads " + quoted_name(n.input(i)) + ", a 5-D view of a channel shuffle; trident reads such views only "
              "as Reshape [N,g,C/g,H,W] → Transpose(0,2,1,3,4) → Reshape [N,C,H,W]");
    if (is_const(n.input(i)))
      fail(n, "input " + quoted_name(n.input(i)) + " is a constant where trident expects a computed tensor");
    if (channels_last_.count(n.input(i)))
      fail(n, "reads " + quoted_name(n.input(i)) + ", a channels-last Transpose(0,2,3,1) view; trident reads such "
              "views only in LayerNormalization, MatMul, Add, Gelu and the Transpose(0,3,1,2) back");
    if (quantized_.count(n.input(i)))
      fail(n, "reads " + quoted_name(n.input(i)) + ", the integers of a QuantizeLinear; trident imports QuantizeLinear "
              "only where a DequantizeLinear reads it back (the QDQ form)");
    if (flat_views_.count(n.input(i)))
      fail(n, "reads " + quoted_name(n.input(i)) + ", a 1-D flatten of an activation; trident reads it only in the "
              "identity Gather of a pooled [N,C,1,1] tensor");
    fail(n, "input " + quoted_name(n.input(i)) + " is neither an initializer nor an earlier node's output (missing initializer?)");
  }
  // Dropout is element-wise and its mask random: it reads the flatten in any order, and what it
  // gives is flattened the same way (emit_dropout).
  if (chw_flattened_.count(it->second) && n.op_type() != "Gemm" && n.op_type() != "MatMul" && n.op_type() != "Dropout")
    fail(n, "reads " + quoted_name(n.input(i)) + ", an [N,C,H,W] tensor flattened with H*W > 1; trident flattens in NHWC "
            "order and reorders only the weights of a Gemm or MatMul reading it directly");
  return it->second;
}

void Importer::define(const onnx::NodeProto& n, int i, int value) {
  if (!has_output(n, i)) return;
  values_[n.output(i)] = value;
}

std::vector<int> Importer::emit(const onnx::NodeProto& n, const std::string& op, std::vector<int> inputs,
                                ir::Attrs attrs, int onnx_outputs) {
  std::vector<int> outs;
  try {
    outs = out_.graph.add_node(op, std::move(inputs), std::move(attrs), node_name(n));
  } catch (const Error& e) {
    fail(n, e.what());
  }
  for (int v : outs)
    if (checked_numel(out_.graph.value(v).shape, "output " + quoted_name(out_.graph.value(v).name)) > kMaxElements)
      fail(n, "its output " + shape_str(out_.graph.value(v).shape) + " is absurdly large");
  for (int i = 0; i < onnx_outputs && i < static_cast<int>(outs.size()); ++i) {
    if (!has_output(n, i)) continue;
    out_.graph.value(outs[i]).name = n.output(i);
    define(n, i, outs[i]);
  }
  return outs;
}

int Importer::weight(const onnx::NodeProto& n, const Const& c, const std::string& layout, Shape shape,
                     std::vector<float> data, bool state) {
  auto it = weights_made_.find(c.name);
  if (it != weights_made_.end()) {
    if (it->second.second != layout || out_.graph.value(it->second.first).shape != shape)
      fail(n, "initializer " + quoted_name(c.name) + " is read in two different roles, which trident does not support");
    return it->second.first;
  }
  if (static_cast<int64_t>(data.size()) != numel(shape))
    fail(n, "initializer " + quoted_name(c.name) + " has " + std::to_string(data.size()) +
                " elements; expected shape " + shape_str(shape));
  int id;
  try {
    // IR and weight names are printable (core/printable.h): every later message quotes them.
    id = state ? out_.graph.add_state(printable(c.name), shape, {ir::Init::Zeros})
               : out_.graph.add_parameter(printable(c.name), shape, {ir::Init::Zeros});
  } catch (const Error& e) {
    fail(n, e.what());
  }
  HostTensor h;
  h.shape = shape;
  h.dtype = DType::f32;
  h.data.resize(data.size() * sizeof(float));
  if (!data.empty()) std::memcpy(h.data.data(), data.data(), h.data.size());
  out_.weights[printable(c.name)] = std::move(h);
  weights_made_[c.name] = {id, layout};
  return id;
}

}  // namespace onnx_detail
}  // namespace trident::frontend
