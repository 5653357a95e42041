// A batch of images for a device that decodes and augments them itself (InputLane::send_images),
// or that normalises the pixels the host made (PixelBatch, InputLane::send_pixels):
// per row either the bytes of a JPEG file and the resampling that makes the row from it — a box
// of the image resized to resize_height x resize_width, the image_size square at (window_top,
// window_left) of that kept, mirrored with flip, then x · scale + shift per channel — or the
// row's floats, made on the host because the device's decoder would not take the file (a PNG,
// a progressive JPEG). The loader draws the boxes on the host as its CPU path does, so a
// sample is the same crop whichever side decodes it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace trident {

struct ImageRowRequest {
  const uint8_t* bytes = nullptr;  // a JPEG file, or image_size² · 3 floats made on the host
  size_t size = 0;
  bool jpeg = true;
  int height = 0, width = 0;  // the JPEG's size
  int box_top = 0, box_left = 0, box_height = 0, box_width = 0;
  int resize_height = 0, resize_width = 0;
  int window_top = 0, window_left = 0;
  bool flip = false;
};

struct ImageBatchRequest {
  int image_size = 0;  // rows are image_size x image_size x 3 floats, NHWC
  float scale[3] = {1, 1, 1}, shift[3] = {0, 0, 0};
  std::vector<ImageRowRequest> rows;
  // Where every row's bytes lie, when they lie in one block the sender reuses (a loader's ring
  // slot): the lane page-locks it once, so the decoder's copies of the files run at the bus's
  // speed. Null where the rows lie apart.
  const void* memory = nullptr;
  size_t memory_bytes = 0;
};

// A batch made on the host as far as its pixels (InputLane::send_pixels): `rows` rows of
// image_size² · 3 bytes, NHWC RGB, already cropped, resized and flipped, which the device turns
// into the batch's floats as x · scale + shift per channel. A quarter of the floats' bytes cross
// the bus.
struct PixelBatch {
  const uint8_t* pixels = nullptr;
  int64_t rows = 0;
  int image_size = 0;
  float scale[3] = {1, 1, 1}, shift[3] = {0, 0, 0};
};

// Makes row `row` of the batch on the host instead, as image_size² · 3 floats into `out`, for a
// file the device could not decode after all (damaged data past its header): the loader
// decodes it on the CPU, or replaces it as it replaces any unreadable image.
using HostRowMaker = std::function<void(int row, float* out)>;

}  // namespace trident
