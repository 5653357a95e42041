// libFuzzer target for the image reader (an image folder's files): any bytes must decode or be
// rejected with trident::Error, within the decode budget a loader worker has, and what decodes
// must go through both transforms — a training crop (decoded as a region, the crop drawn from the
// header's size as the loader draws it) and the evaluation resize — at a size and seed the input's
// first bytes choose. Seeds: corpus/image (fuzz/make_corpus.py), tokens: image.dict.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "runtime/data/image_codec.h"
#include "runtime/data/image_transform.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trident::data;
  if (size < 2) return 0;
  const int out = 4 + data[0] % 29;  // 4..32 pixels a side
  const uint64_t seed = data[1];
  data += 2;
  size -= 2;
  std::vector<float> sample(static_cast<size_t>(out) * out * 3);
  const DecodeLimits limits{uint64_t{128} << 20};  // a loader worker's default share
  try {
    TrainCrop crop;
    const RgbRegion region = decode_image_region(data, size, "fuzz input", [&](int height, int width) {
      crop = train_crop(height, width, seed);
      return crop.box;
    }, limits);
    train_transform_region(region, crop, out, kImageNetNormalisation, sample.data());
  } catch (const trident::Error&) {
    // A clean rejection is a correct outcome.
  }
  try {
    const RgbImage image = decode_image(data, size, "fuzz input", limits);
    eval_transform(image, out, kImageNetNormalisation, sample.data());
  } catch (const trident::Error&) {
  }
  return 0;
}
