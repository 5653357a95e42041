// The C++ model builder: layer-level calls (conv, batchnorm, relu, cbr, ...) that create
// parameters with PyTorch-style names ("layer1.0.conv1.weight") and the nodes that use them.
// Shape errors surface immediately as sentences naming the layer.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace trident::frontend {

struct ConvOptions {
  int64_t dilation = 1;
  int64_t groups = 1;
  bool bias = false;
};

class Builder {
 public:
  // Parameters and state are created in `dtype` (f32; f64 for gradient checks).
  explicit Builder(ir::Graph& g, DType dtype = DType::f32) : g_(g), dtype_(dtype) {}

  int input(const std::string& name, Shape shape, DType dtype = DType::f32);

  int conv(int x, int64_t out_ch, int64_t kernel, int64_t stride, int64_t pad,
           ConvOptions opt = {}, const std::string& name = "");
  int batchnorm(int x, const std::string& name = "", double eps = 1e-5, double momentum = 0.1);
  int relu(int x, const std::string& name = "");
  // fn: sigmoid, silu, hardsigmoid, hardswish (ops/activation.cpp).
  int activation(int x, const std::string& fn, const std::string& name = "");
  int mul(int a, int b, const std::string& name = "");
  // Zeroes elements with probability p in training (scaling the rest by 1/(1-p)); the identity
  // in inference (ops/dropout.h).
  int dropout(int x, double p, const std::string& name = "");
  int add(int a, int b, const std::string& name = "");
  int maxpool(int x, int64_t kernel, int64_t stride, int64_t pad = 0, const std::string& name = "");
  int avgpool(int x, int64_t kernel, int64_t stride, int64_t pad = 0, const std::string& name = "");
  int global_avgpool(int x, const std::string& name = "");
  int flatten(int x, const std::string& name = "");
  int linear(int x, int64_t out_features, bool bias = true, const std::string& name = "");

  // conv (no bias) → batchnorm → relu: the block trident exists to fuse.
  int cbr(int x, int64_t out_ch, int64_t kernel, int64_t stride, int64_t pad,
          const std::string& name = "");

  // Names created inside a scope are prefixed "scope.": push("layer1.0") ... pop().
  void push(const std::string& scope) { scopes_.push_back(scope); }
  void pop() { scopes_.pop_back(); }

  ir::Graph& graph() { return g_; }

 private:
  std::string scoped(const std::string& name, const char* kind);
  int64_t channels(int x) const;

  ir::Graph& g_;
  DType dtype_;
  std::vector<std::string> scopes_;
  int counter_ = 0;
};

}  // namespace trident::frontend
