// Test support: ONNX models written byte by byte (protobuf wire format), so a test can craft
// a hostile model without Python or the ONNX headers, which trident keeps private.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace trident::test_support {

// Protobuf fields: varints and length-delimited bytes, enough for ModelProto.
inline std::string pb_varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  return out + static_cast<char>(v);
}
inline std::string pb_int(int field, uint64_t v) { return pb_varint(uint64_t(field) << 3) + pb_varint(v); }
inline std::string pb_bytes(int field, const std::string& b) {
  return pb_varint((uint64_t(field) << 3) | 2) + pb_varint(b.size()) + b;
}

// A one-Conv model: input [batch (or the symbol N when batch is 0), 1, 1, 1], a float weight
// [out_channels, 1, kernel, kernel] of ones, symmetric `pad`, opset 13. `node_name` and
// `op_type` name the node (a crafted name or an unsupported op for message tests).
inline std::string conv_model_bytes(int64_t batch, int64_t out_channels, int64_t kernel, int64_t pad,
                                    const std::string& node_name = "conv", const std::string& op_type = "Conv") {
  const std::string n_dim = batch > 0 ? pb_int(1, uint64_t(batch)) : pb_bytes(2, "N");
  std::string shape = pb_bytes(1, n_dim);
  for (int i = 0; i < 3; ++i) shape += pb_bytes(1, pb_int(1, 1));
  const std::string type = pb_bytes(1, pb_int(1, 1) + pb_bytes(2, shape));  // float tensor
  const std::string input = pb_bytes(11, pb_bytes(1, "x") + pb_bytes(2, type));
  const std::string output = pb_bytes(12, pb_bytes(1, "y"));

  std::vector<float> ones(static_cast<size_t>(out_channels * kernel * kernel), 1.0f);
  std::string raw(ones.size() * 4, '\0');
  std::memcpy(raw.data(), ones.data(), raw.size());
  std::string weight;
  for (int64_t d : {out_channels, int64_t{1}, kernel, kernel}) weight += pb_int(1, uint64_t(d));
  weight += pb_int(2, 1) + pb_bytes(8, "w") + pb_bytes(9, raw);

  std::string pads;
  for (int i = 0; i < 4; ++i) pads += pb_int(8, uint64_t(pad));
  const std::string node = pb_bytes(1, "x") + pb_bytes(1, "w") + pb_bytes(2, "y") + pb_bytes(3, node_name) +
                           pb_bytes(4, op_type) + pb_bytes(5, pb_bytes(1, "pads") + pads + pb_int(20, 7));
  const std::string graph = pb_bytes(1, node) + pb_bytes(2, "g") + pb_bytes(5, weight) + input + output;
  return pb_int(1, 8) + pb_bytes(7, graph) + pb_bytes(8, pb_int(2, 13));
}

// A float initializer (TensorProto) of `dims` holding `values`.
inline std::string pb_float_tensor(const std::string& name, const std::vector<int64_t>& dims,
                                   const std::vector<float>& values) {
  std::string t;
  for (int64_t d : dims) t += pb_int(1, uint64_t(d));
  std::string raw(values.size() * 4, '\0');
  std::memcpy(raw.data(), values.data(), raw.size());
  return t + pb_int(2, 1) + pb_bytes(8, name) + pb_bytes(9, raw);
}

// A graph input (GraphProto field 11): a float tensor named `name` of fixed `dims`.
inline std::string pb_float_input(const std::string& name, const std::vector<int64_t>& dims) {
  std::string shape;
  for (int64_t d : dims) shape += pb_bytes(1, pb_int(1, uint64_t(d)));
  const std::string type = pb_bytes(1, pb_int(1, 1) + pb_bytes(2, shape));
  return pb_bytes(11, pb_bytes(1, name) + pb_bytes(2, type));
}

// Conv (1 -> 2 channels, 1x1, on a [1, 1, 2, 2] input) then an inference BatchNormalization whose
// running variance is `var` for both channels (scale 1, bias 0, mean 0), opset 13.
inline std::string conv_bn_model_bytes(float var) {
  const std::string input = pb_float_input("x", {1, 1, 2, 2});
  const std::string output = pb_bytes(12, pb_bytes(1, "z"));
  const std::string conv = pb_bytes(1, "x") + pb_bytes(1, "w") + pb_bytes(2, "y") + pb_bytes(3, "conv") + pb_bytes(4, "Conv");
  std::string bn;
  for (const char* in : {"y", "scale", "bias", "mean", "var"}) bn += pb_bytes(1, in);
  bn += pb_bytes(2, "z") + pb_bytes(3, "bn") + pb_bytes(4, "BatchNormalization");
  std::string inits = pb_bytes(5, pb_float_tensor("w", {2, 1, 1, 1}, {1, 1}));
  inits += pb_bytes(5, pb_float_tensor("scale", {2}, {1, 1})) + pb_bytes(5, pb_float_tensor("bias", {2}, {0, 0}));
  inits += pb_bytes(5, pb_float_tensor("mean", {2}, {0, 0})) + pb_bytes(5, pb_float_tensor("var", {2}, {var, var}));
  const std::string graph = pb_bytes(1, conv) + pb_bytes(1, bn) + pb_bytes(2, "g") + inits + input + output;
  return pb_int(1, 8) + pb_bytes(7, graph) + pb_bytes(8, pb_int(2, 13));
}

// An int64 initializer (TensorProto) of shape [values.size()].
inline std::string pb_int64_tensor(const std::string& name, const std::vector<int64_t>& values) {
  std::string raw(values.size() * 8, '\0');
  std::memcpy(raw.data(), values.data(), raw.size());
  return pb_int(1, values.size()) + pb_int(2, 7) + pb_bytes(8, name) + pb_bytes(9, raw);
}

// The graph input [1, 3, 1, 1] read directly by a Flatten (axis 1), or by a Reshape to [1, -1]
// when `reshape`; output y [1, 3]. opset 13.
inline std::string flatten_input_model_bytes(bool reshape) {
  const std::string input = pb_float_input("x", {1, 3, 1, 1});
  const std::string output = pb_bytes(12, pb_bytes(1, "y"));
  std::string node = pb_bytes(1, "x");
  if (reshape) node += pb_bytes(1, "shape");
  node += pb_bytes(2, "y") + pb_bytes(3, "flat") + pb_bytes(4, reshape ? "Reshape" : "Flatten");
  if (!reshape) node += pb_bytes(5, pb_bytes(1, "axis") + pb_int(3, 1) + pb_int(20, 2));
  const std::string inits = reshape ? pb_bytes(5, pb_int64_tensor("shape", {1, -1})) : "";
  const std::string graph = pb_bytes(1, node) + pb_bytes(2, "g") + inits + input + output;
  return pb_int(1, 8) + pb_bytes(7, graph) + pb_bytes(8, pb_int(2, 13));
}

}  // namespace trident::test_support
