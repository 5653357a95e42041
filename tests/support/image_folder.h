// Test support: small image folders (DIR/<split>/<class>/NAME) written with trident's own
// encoders, so tests of the image loader need no files from elsewhere. A sample's colour says
// its class, so a network can learn the task in a few steps.
#pragma once
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/data/image_codec.h"

namespace trident::test_support {

inline void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                           static_cast<std::streamsize>(bytes.size()));
}

// A width x height RGB image: class `label`'s base colour, a gradient and a per-`sample` ripple.
inline std::vector<uint8_t> class_pixels(int width, int height, int label, int sample) {
  static const uint8_t kBase[4][3] = {{200, 40, 40}, {40, 60, 200}, {40, 190, 60}, {210, 200, 50}};
  std::vector<uint8_t> px(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) {
        const int v = kBase[label % 4][c] + (x * 31 + y * 17 + sample * 13 + c * 7) % 41 - 20;
        px[(static_cast<size_t>(y) * width + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0, 255));
      }
  return px;
}

// `per_class` images of each of `classes` classes (folders "class0", "class1", …) under
// root/split, alternately JPEG and PNG, of sizes that vary around width x height.
inline void write_class_images(const std::filesystem::path& root, const std::string& split, int classes,
                               int per_class, int width, int height) {
  for (int label = 0; label < classes; ++label)
    for (int i = 0; i < per_class; ++i) {
      const int w = width + (i % 3) * 5, h = height + (i % 2) * 7;
      const std::vector<uint8_t> px = class_pixels(w, h, label, i);
      const std::filesystem::path dir = root / split / ("class" + std::to_string(label));
      const std::string stem = "img" + std::to_string(100 + i);
      if (i % 2 == 0)
        write_file(dir / (stem + ".jpg"), data::encode_jpeg(px.data(), w, h, 3, 90));
      else
        write_file(dir / (stem + ".png"), data::encode_png(px.data(), w, h, 3));
    }
}

}  // namespace trident::test_support
