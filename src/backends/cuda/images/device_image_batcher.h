// Makes a batch of training or evaluation images on the GPU (backends/image_batch.h): the JPEG
// rows decoded by nvJPEG (only each crop's box where the hardware decoder takes regions), then
// resampled and normalised into the batch by one kernel over a table of taps; the rows made on
// the host uploaded as they are. Decoded pixels live in an arena
// of the context's memory whose size is capped (kArenaBytes): a batch that would need more is
// made in parts, so device memory is bounded whatever the images' sizes.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/images/image_resample.h"
#include "backends/cuda/images/jpeg_batch_decoder.h"
#include "backends/image_batch.h"

namespace trident::cuda {

class CudaContext;

class DeviceImageBatcher {
 public:
  static constexpr size_t kArenaBytes = size_t{512} << 20;

  // Null with the reason in *why when the GPU cannot decode JPEGs here.
  static std::unique_ptr<DeviceImageBatcher> make(CudaContext& ctx, std::string* why);
  ~DeviceImageBatcher();
  DeviceImageBatcher(const DeviceImageBatcher&) = delete;
  DeviceImageBatcher& operator=(const DeviceImageBatcher&) = delete;

  // Writes batch.rows.size() rows of batch.image_size² · 3 floats at `out` (device memory) on
  // `stream`, rows the GPU fails to decode made by `on_host` and uploaded. Returns once the
  // work is done and nothing `batch` points to is read any more.
  void make(const ImageBatchRequest& batch, const HostRowMaker& on_host, float* out, cudaStream_t stream);

  std::string description() const { return decoder_->description(); }
  // Rows decoded on the GPU, and rows made on the host (sent so, or given back by nvJPEG), so far.
  int64_t decoded_rows() const { return decoded_rows_; }
  int64_t host_rows() const { return host_rows_; }
  // Of the decoded rows, those whose JPEG was decoded only as far as its crop box.
  int64_t region_rows() const { return region_rows_; }
  // Whether a training row's JPEG is decoded only as far as its crop box where the decoder can
  // (the default, unless TRIDENT_DECODE_WHOLE_JPEGS=1 is set): the same pixels, and nvJPEG's
  // conversion kernel writes only the box (7 % less of its GPU time on an H100: docs/GPU.md).
  void decode_regions(bool on) { decode_regions_ = on; }

 private:
  DeviceImageBatcher(CudaContext& ctx, std::unique_ptr<JpegBatchDecoder> decoder);
  // Rows [first, last) of the batch, whose pixels fit the arena together.
  void make_part(const ImageBatchRequest& batch, size_t first, size_t last, const HostRowMaker& on_host, float* out,
                 cudaStream_t stream);
  void reserve_arena(size_t bytes);

  CudaContext& ctx_;
  std::unique_ptr<JpegBatchDecoder> decoder_;
  uint8_t* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  ResampleRow* device_rows_ = nullptr;  // as many as the largest batch so far
  size_t device_row_capacity_ = 0;
  void* taps_ = nullptr;  // the resampling's table of taps (image_resample_scratch_bytes)
  size_t taps_bytes_ = 0;
  std::vector<float> host_row_;  // a row made on the host
  int64_t decoded_rows_ = 0, host_rows_ = 0, region_rows_ = 0;
  bool decode_regions_;
};

// Bytes one image of height x width takes in the arena: rows of width * 3 bytes, 256-aligned.
size_t arena_image_bytes(int height, int width);

}  // namespace trident::cuda
