// The consumer of an installed trident: a zoo model compiled for inference on the CPU runs one
// batch, and a training network takes two steps. It prints what install_test.cmake checks.
#include <trident/trident.h>

#include <cstdio>
#include <numeric>
#include <vector>

int main() try {
  const trident::Model model = trident::Model::zoo("fmnist_cnn");
  trident::Network net(model, {.device = "cpu", .batch = 4});
  const std::vector<float> images(net.input_size(), 0.5f);
  const std::vector<float> p = net.probabilities(images);
  std::printf("inference: %zu probabilities summing to %.3f\n", p.size(), std::accumulate(p.begin(), p.end(), 0.0));
  trident::Network train(model, {.mode = trident::Mode::training, .device = "cpu", .batch = 4});
  const std::vector<int32_t> labels = {0, 1, 2, 3};
  const float first = train.train_step(images, labels), second = train.train_step(images, labels);
  std::printf("training: loss %.4f then %.4f (%s)\n", first, second, second < first ? "fell" : "did not fall");
  return 0;
} catch (const trident::Error& e) {
  std::fprintf(stderr, "consumer: %s\n", e.what());
  return 1;
}
