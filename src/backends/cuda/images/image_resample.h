// The training and evaluation transforms on the GPU, from decoded RGB bytes in device memory to
// the batch's normalised floats: a box of each image resized with PIL's bilinear filter (the
// triangle widened by the scale factor when shrinking), a window of that kept, mirrored when
// asked, then x · scale + shift per channel. The taps and weights are those of the CPU path
// (runtime/data/image_transform.cpp), computed the same way in double and applied in float in
// its order, horizontal sums first.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace trident::cuda {

// One output row of the batch and where it comes from.
struct ResampleRow {
  const uint8_t* pixels = nullptr;  // interleaved RGB, rows of `pitch` bytes
  int64_t pitch = 0;
  int box_top = 0, box_left = 0, box_height = 0, box_width = 0;
  int resize_height = 0, resize_width = 0;
  int window_top = 0, window_left = 0;
  int flip = 0;
  int out_row = 0;  // which row of `out` it writes
};

// Writes rows[i].out_row of `out` (size x size x 3 floats each, NHWC) for the `count` rows
// described in device memory at `rows`. Each output row's and column's taps are worked out once,
// into `scratch` (device memory of image_resample_scratch_bytes(count, size) bytes), not per pixel.
void launch_image_resample(const ResampleRow* rows, int count, int size, const float scale[3], const float shift[3],
                           float* out, void* scratch, cudaStream_t stream);
size_t image_resample_scratch_bytes(int count, int size);

}  // namespace trident::cuda
