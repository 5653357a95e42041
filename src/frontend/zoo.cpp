// Zoo networks with torchvision's layer structure and parameter names (ResNet v1.5: the stride
// sits on the 3x3 conv of a bottleneck), so parameter counts and MACs match published figures.
#include "frontend/zoo.h"

#include <functional>

#include "core/error.h"
#include "frontend/builder.h"

namespace trident::frontend {

namespace {

// Fashion-MNIST default: three CBR blocks, two poolings, one classifier.
void fmnist_cnn(Builder& b, int x, int64_t classes) {
  x = b.cbr(x, 16, 3, 1, 1, "block1");
  x = b.maxpool(x, 2, 2, 0, "pool1");
  x = b.cbr(x, 32, 3, 1, 1, "block2");
  x = b.maxpool(x, 2, 2, 0, "pool2");
  x = b.cbr(x, 64, 3, 1, 1, "block3");
  x = b.flatten(x, "flatten");
  b.graph().mark_output(b.linear(x, classes, true, "fc"));
}

// conv → bn (→ relu), named the way torchvision names them inside a block.
int conv_bn(Builder& b, int x, int64_t out, int64_t k, int64_t s, int64_t p, const std::string& idx,
            bool relu) {
  x = b.conv(x, out, k, s, p, {}, "conv" + idx);
  x = b.batchnorm(x, "bn" + idx);
  return relu ? b.relu(x, "relu" + idx) : x;
}

int shortcut(Builder& b, int x, int64_t out, int64_t stride) {
  const int64_t in = b.graph().value(x).shape[3];
  if (stride == 1 && in == out) return x;
  b.push("downsample");
  x = b.conv(x, out, 1, stride, 0, {}, "0");
  x = b.batchnorm(x, "1");
  b.pop();
  return x;
}

int basic_block(Builder& b, int x, int64_t out, int64_t stride) {
  int y = conv_bn(b, x, out, 3, stride, 1, "1", true);
  y = conv_bn(b, y, out, 3, 1, 1, "2", false);
  return b.relu(b.add(y, shortcut(b, x, out, stride), "add"), "relu");
}

int bottleneck(Builder& b, int x, int64_t width, int64_t stride) {
  int y = conv_bn(b, x, width, 1, 1, 0, "1", true);
  y = conv_bn(b, y, width, 3, stride, 1, "2", true);
  y = conv_bn(b, y, width * 4, 1, 1, 0, "3", false);
  return b.relu(b.add(y, shortcut(b, x, width * 4, stride), "add"), "relu");
}

using BlockFn = int (*)(Builder&, int, int64_t, int64_t);

int stage(Builder& b, int x, const std::string& name, BlockFn block, int64_t width, int count,
          int64_t stride) {
  for (int i = 0; i < count; ++i) {
    b.push(name + "." + std::to_string(i));
    x = block(b, x, width, i == 0 ? stride : 1);
    b.pop();
  }
  return x;
}

void imagenet_resnet(Builder& b, int x, int64_t classes, BlockFn block, std::vector<int> counts) {
  x = b.conv(x, 64, 7, 2, 3, {}, "conv1");
  x = b.relu(b.batchnorm(x, "bn1"), "relu");
  x = b.maxpool(x, 3, 2, 1, "maxpool");
  const int64_t widths[4] = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s)
    x = stage(b, x, "layer" + std::to_string(s + 1), block, widths[s], counts[s], s == 0 ? 1 : 2);
  x = b.flatten(b.global_avgpool(x, "avgpool"), "flatten");
  b.graph().mark_output(b.linear(x, classes, true, "fc"));
}

// ResNet-20 for 32x32 inputs (He et al. 2016, CIFAR variant with projection shortcuts).
void resnet_cifar(Builder& b, int x, int64_t classes) {
  x = b.relu(b.batchnorm(b.conv(x, 16, 3, 1, 1, {}, "conv1"), "bn1"), "relu");
  x = stage(b, x, "layer1", basic_block, 16, 3, 1);
  x = stage(b, x, "layer2", basic_block, 32, 3, 2);
  x = stage(b, x, "layer3", basic_block, 64, 3, 2);
  x = b.flatten(b.global_avgpool(x, "avgpool"), "flatten");
  b.graph().mark_output(b.linear(x, classes, true, "fc"));
}

void vgg16_bn(Builder& b, int x, int64_t classes) {
  const int cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
  int i = 0;  // torchvision's index inside `features`
  b.push("features");
  for (int c : cfg) {
    if (c == 0) {
      x = b.maxpool(x, 2, 2, 0, std::to_string(i++));
      continue;
    }
    x = b.conv(x, c, 3, 1, 1, {.bias = true}, std::to_string(i++));
    x = b.batchnorm(x, std::to_string(i++));
    x = b.relu(x, std::to_string(i++));
  }
  b.pop();
  x = b.flatten(x, "flatten");
  b.push("classifier");
  x = b.relu(b.linear(x, 4096, true, "0"), "1");
  x = b.relu(b.linear(x, 4096, true, "3"), "4");
  b.graph().mark_output(b.linear(x, classes, true, "6"));
  b.pop();
}

struct Entry {
  ModelInfo info;
  std::function<void(Builder&, int, int64_t)> build;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {{"fmnist_cnn", "3 CBR blocks + linear, for 28x28 grey images (the default)", 28, 28, 1, 10},
       fmnist_cnn},
      {{"resnet_cifar", "ResNet-20 for 32x32 colour images", 32, 32, 3, 10}, resnet_cifar},
      {{"resnet18", "ResNet-18 (basic blocks), ImageNet shapes", 224, 224, 3, 1000},
       [](Builder& b, int x, int64_t k) { imagenet_resnet(b, x, k, basic_block, {2, 2, 2, 2}); }},
      {{"resnet50", "ResNet-50 v1.5 (bottlenecks), ImageNet shapes", 224, 224, 3, 1000},
       [](Builder& b, int x, int64_t k) { imagenet_resnet(b, x, k, bottleneck, {3, 4, 6, 3}); }},
      {{"vgg16_bn", "VGG16 with batch norm, ImageNet shapes", 224, 224, 3, 1000}, vgg16_bn},
  };
  return e;
}

}  // namespace

const std::vector<ModelInfo>& model_list() {
  static const std::vector<ModelInfo> list = [] {
    std::vector<ModelInfo> l;
    for (const auto& e : entries()) l.push_back(e.info);
    return l;
  }();
  return list;
}

std::string default_model() { return "fmnist_cnn"; }

ir::Graph build_model(const std::string& name, const ModelConfig& cfg) {
  for (const auto& e : entries()) {
    if (e.info.name != name) continue;
    auto pick = [](int64_t v, int64_t d) { return v > 0 ? v : d; };
    if (cfg.batch < 1) throw Error("the batch size must be at least 1, got " + std::to_string(cfg.batch));
    ir::Graph g;
    Builder b(g);
    int x = b.input("images", {cfg.batch, pick(cfg.height, e.info.height),
                               pick(cfg.width, e.info.width), pick(cfg.channels, e.info.channels)});
    try {
      e.build(b, x, pick(cfg.classes, e.info.classes));
    } catch (const Error& err) {
      throw Error("model '" + name + "' does not fit input " + shape_str(g.value(x).shape) + ": " +
                  err.what());
    }
    return g;
  }
  std::string known;
  for (const auto& e : entries()) known += (known.empty() ? "" : ", ") + e.info.name;
  throw Error("unknown model '" + name + "' (known models: " + known + ")");
}

}  // namespace trident::frontend
