// Telling a training import that its batch norms are gone. Both of PyTorch's exporters can fold
// BatchNorm into the preceding convolution's weights before writing the file: the dynamo
// exporter (the default) always does unless optimize=False, even for model.train(), and the
// TorchScript exporter does in eval mode. Such a file trains without batch norm and with no
// Conv→BN→ReLU to fuse, so the import says so in one notice naming the call that keeps them.
// The evidence is what each exporter leaves behind: the dynamo exporter's rewriter names its
// rule (FuseBatchNormIntoConv) in the node's metadata, and the TorchScript exporter's folded
// weights are new initializers named onnx::Conv_<n> instead of the module's parameter names.
#include <string>

#include "frontend/onnx/onnx_detail.h"

namespace trident::frontend::onnx_detail {

namespace {

// NodeProto.metadata_props (field 9, ONNX ≥ 1.16) is unknown to older generated classes, so it
// is read from the unknown fields: each one a StringStringEntryProto (key = 1, value = 2).
bool metadata_mentions(const onnx::NodeProto& n, const std::string& word) {
  const auto& unknown = n.GetReflection()->GetUnknownFields(n);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto& f = unknown.field(i);
    if (f.number() == 9 && f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED &&
        f.length_delimited().find(word) != std::string::npos)
      return true;
  }
  // Where the generated class knows the field, its entries are messages of their own.
  const auto* d = n.GetDescriptor()->FindFieldByNumber(9);
  if (d && d->is_repeated() && d->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE)
    for (int k = 0; k < n.GetReflection()->FieldSize(n, d); ++k)
      if (n.GetReflection()->GetRepeatedMessage(n, d, k).SerializeAsString().find(word) != std::string::npos)
        return true;
  return false;
}

}  // namespace

void Importer::notice_folded_batchnorm(const onnx::ModelProto& model) {
  const onnx::GraphProto& g = model.graph();
  const bool from_pytorch = model.producer_name() == "pytorch";
  int dynamo = 0, torchscript = 0, batchnorms = 0;
  for (const auto& n : g.node()) {
    if (n.op_type() == "BatchNormalization") ++batchnorms;
    if (n.op_type() != "Conv" && n.op_type() != "Gemm") continue;
    if (metadata_mentions(n, "FuseBatchNormInto")) ++dynamo;
    else if (from_pytorch && n.op_type() == "Conv" && n.input_size() > 1 && n.input(1).rfind("onnx::Conv_", 0) == 0)
      ++torchscript;
  }
  if (dynamo + torchscript == 0) return;
  const std::string count = std::to_string(dynamo + torchscript) + " layer" + (dynamo + torchscript == 1 ? "" : "s");
  const std::string kept = batchnorms ? " (" + std::to_string(batchnorms) + " batch norms are still there)" : "";
  const std::string exporter = dynamo > 0 ? "PyTorch's exporter" : "PyTorch's TorchScript exporter (in eval mode)";
  out_.notices.push_back(label_ + ": " + exporter + " folded the batch norms of " + count + " into their weights" +
                         kept + ", so they train without batch norm and with no Conv→BN→ReLU fused; export with "
                         "trident.Model.from_torch(model, x), or torch.onnx.export(model, (x,), f, dynamo=True, "
                         "optimize=False), to keep them");
}

}  // namespace trident::frontend::onnx_detail
