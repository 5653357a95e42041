// libFuzzer target for the image reader (an image folder's files): any bytes must decode or be
// rejected with trident::Error, within a decode budget, and what decodes
// must go through both transforms — a training crop (decoded as a region, the crop drawn from the
// header's size as the loader draws it) and the evaluation resize — at a size and seed drawn from
// a hash of the input, so that the seeds stay whole image files (corpus/image, written by
// fuzz/make_corpus.py and decoded by the unit tests too). Tokens: image.dict.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "runtime/data/image_codec.h"
#include "runtime/data/image_transform.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trident::data;
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over the whole input
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 1099511628211ull;
  const int out = 4 + static_cast<int>(hash % 29);  // 4..32 pixels a side
  const uint64_t seed = hash >> 32;
  std::vector<float> sample(static_cast<size_t>(out) * out * 3);
  // A smaller share than a loader worker's 128 MiB, through the same checks: a few hundred bytes
  // can claim tens of megapixels that the decoder then fills (seconds under the sanitizers), and
  // at the full share the hour would go on a few thousand such decodes.
  const DecodeLimits limits{uint64_t{8} << 20};
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
