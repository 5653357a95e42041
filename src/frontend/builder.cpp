// Layer calls of the model builder. Parameters follow PyTorch's initialisation (Kaiming
// uniform for conv/linear weights with a=√5, i.e. bound = 1/√fan_in; BN γ=1, β=0) and names,
// so checkpoints and ONNX exports map onto them one to one.
#include "frontend/builder.h"

namespace trident::frontend {

std::string Builder::scoped(const std::string& name, const char* kind) {
  std::string base = name.empty() ? std::string(kind) + std::to_string(++counter_) : name;
  std::string out;
  for (const auto& s : scopes_) out += s + ".";
  return out + base;
}

int64_t Builder::channels(int x) const { return g_.value(x).shape.back(); }

int Builder::input(const std::string& name, Shape shape, DType dtype) {
  return g_.add_input(name, std::move(shape), dtype);
}

int Builder::conv(int x, int64_t out_ch, int64_t kernel, int64_t stride, int64_t pad,
                  ConvOptions opt, const std::string& name) {
  const std::string n = scoped(name, "conv");
  const int64_t cin = g_.value(x).shape.size() == 4 ? channels(x) : 0;
  const int64_t cg = opt.groups > 0 && cin % opt.groups == 0 ? cin / opt.groups : cin;
  const int64_t fan_in = cg * kernel * kernel;
  std::vector<int> in{x, g_.add_parameter(n + ".weight", {out_ch, kernel, kernel, cg > 0 ? cg : 1},
                                          {ir::Init::KaimingUniform, fan_in}, dtype_)};
  if (opt.bias) in.push_back(g_.add_parameter(n + ".bias", {out_ch}, {ir::Init::KaimingUniform, fan_in}, dtype_));
  ir::Attrs a{{"stride", std::vector<int64_t>{stride, stride}},
              {"padding", std::vector<int64_t>{pad, pad}},
              {"dilation", std::vector<int64_t>{opt.dilation, opt.dilation}},
              {"groups", opt.groups}};
  return g_.add_node1("conv2d", in, a, n);
}

int Builder::batchnorm(int x, const std::string& name, double eps, double momentum) {
  const std::string n = scoped(name, "bn");
  const Shape c{channels(x)};
  std::vector<int> in{x, g_.add_parameter(n + ".weight", c, {ir::Init::Ones}, dtype_),
                      g_.add_parameter(n + ".bias", c, {ir::Init::Zeros}, dtype_),
                      g_.add_state(n + ".running_mean", c, {ir::Init::Zeros}, dtype_),
                      g_.add_state(n + ".running_var", c, {ir::Init::Ones}, dtype_)};
  ir::Attrs a{{"eps", eps}, {"momentum", momentum}, {"training", int64_t{1}}};
  return g_.add_node("batchnorm2d", in, a, n).at(0);
}

int Builder::relu(int x, const std::string& name) {
  return g_.add_node1("relu", {x}, {}, scoped(name, "relu"));
}

int Builder::activation(int x, const std::string& fn, const std::string& name) {
  return g_.add_node1("activation", {x}, {{"fn", fn}}, scoped(name, fn.c_str()));
}

int Builder::dropout(int x, double p, const std::string& name) {
  return g_.add_node1("dropout", {x}, {{"p", p}}, scoped(name, "dropout"));
}

int Builder::mul(int a, int b, const std::string& name) { return g_.add_node1("mul", {a, b}, {}, scoped(name, "mul")); }

int Builder::add(int a, int b, const std::string& name) {
  return g_.add_node1("add", {a, b}, {}, scoped(name, "add"));
}

int Builder::maxpool(int x, int64_t kernel, int64_t stride, int64_t pad, const std::string& name) {
  ir::Attrs a{{"kernel", std::vector<int64_t>{kernel, kernel}},
              {"stride", std::vector<int64_t>{stride, stride}},
              {"padding", std::vector<int64_t>{pad, pad}}};
  return g_.add_node1("maxpool2d", {x}, a, scoped(name, "maxpool"));
}

int Builder::avgpool(int x, int64_t kernel, int64_t stride, int64_t pad, const std::string& name) {
  ir::Attrs a{{"kernel", std::vector<int64_t>{kernel, kernel}},
              {"stride", std::vector<int64_t>{stride, stride}},
              {"padding", std::vector<int64_t>{pad, pad}}};
  return g_.add_node1("avgpool2d", {x}, a, scoped(name, "avgpool"));
}

int Builder::global_avgpool(int x, const std::string& name) {
  return g_.add_node1("global_avgpool", {x}, {}, scoped(name, "avgpool"));
}

int Builder::flatten(int x, const std::string& name) {
  return g_.add_node1("flatten", {x}, {}, scoped(name, "flatten"));
}

int Builder::linear(int x, int64_t out_features, bool bias, const std::string& name) {
  const std::string n = scoped(name, "fc");
  const int64_t fan_in = g_.value(x).shape.back();
  std::vector<int> in{x, g_.add_parameter(n + ".weight", {out_features, fan_in},
                                          {ir::Init::KaimingUniform, fan_in}, dtype_)};
  if (bias) in.push_back(g_.add_parameter(n + ".bias", {out_features}, {ir::Init::KaimingUniform, fan_in}, dtype_));
  return g_.add_node1("linear", in, {}, n);
}

int Builder::cbr(int x, int64_t out_ch, int64_t kernel, int64_t stride, int64_t pad,
                 const std::string& name) {
  const std::string base = name.empty() ? "block" + std::to_string(++counter_) : name;
  push(base);
  int y = conv(x, out_ch, kernel, stride, pad, {}, "conv");
  y = batchnorm(y, "bn");
  y = relu(y, "relu");
  pop();
  return y;
}

}  // namespace trident::frontend
