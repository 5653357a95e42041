// The batch maker of device_image_batcher.h. Per part of a batch: upload the rows made on the
// host, place each JPEG's pixels in the arena and decode them there (one nvJPEG batch; a row whose
// crop box is less than its image asks for that box only), make the rows nvJPEG failed on with the
// host's maker, then the resampling (its taps, then the pixels) over the rest.
#include "backends/cuda/images/device_image_batcher.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_context.h"

namespace trident::cuda {

size_t arena_image_bytes(int height, int width) {
  const size_t bytes = static_cast<size_t>(height) * static_cast<size_t>(width) * 3;
  return (bytes + 255) / 256 * 256;
}

std::unique_ptr<DeviceImageBatcher> DeviceImageBatcher::make(CudaContext& ctx, std::string* why) {
  std::unique_ptr<JpegBatchDecoder> decoder = make_jpeg_batch_decoder(why);
  if (!decoder) return nullptr;
  return std::unique_ptr<DeviceImageBatcher>(new DeviceImageBatcher(ctx, std::move(decoder)));
}

DeviceImageBatcher::DeviceImageBatcher(CudaContext& ctx, std::unique_ptr<JpegBatchDecoder> decoder)
    : ctx_(ctx), decoder_(std::move(decoder)) {
  const char* whole = std::getenv("TRIDENT_DECODE_WHOLE_JPEGS");
  decode_regions_ = whole == nullptr || std::strcmp(whole, "1") != 0;
}

DeviceImageBatcher::~DeviceImageBatcher() {
  if (arena_) ctx_.free(arena_);
  if (device_rows_) ctx_.free(device_rows_);
  if (taps_) ctx_.free(taps_);
}

void DeviceImageBatcher::reserve_arena(size_t bytes) {
  if (bytes <= arena_bytes_) return;
  if (arena_) ctx_.free(arena_);
  arena_ = nullptr;
  arena_bytes_ = 0;
  arena_ = static_cast<uint8_t*>(ctx_.allocate(bytes));
  arena_bytes_ = bytes;
  // The context zeroes new memory on its compute stream, not the stream that fills it.
  check(cudaStreamSynchronize(ctx_.stream()), "zeroing the image arena");
}

void DeviceImageBatcher::make(const ImageBatchRequest& batch, const HostRowMaker& on_host, float* out,
                              cudaStream_t stream) {
  const size_t n = batch.rows.size();
  const size_t taps_bytes = image_resample_scratch_bytes(static_cast<int>(n), batch.image_size);
  if (n > device_row_capacity_ || taps_bytes > taps_bytes_) {
    for (void* p : {static_cast<void*>(device_rows_), taps_})
      if (p) ctx_.free(p);
    device_rows_ = nullptr, taps_ = nullptr;
    device_row_capacity_ = 0, taps_bytes_ = 0;
    device_rows_ = static_cast<ResampleRow*>(ctx_.allocate(n * sizeof(ResampleRow)));
    device_row_capacity_ = n;
    taps_ = ctx_.allocate(taps_bytes);
    taps_bytes_ = taps_bytes;
    check(cudaStreamSynchronize(ctx_.stream()), "zeroing the resampling's rows");
  }
  // Parts of the batch whose pixels fit kArenaBytes together (an image larger than that alone).
  for (size_t first = 0; first < n;) {
    size_t last = first, bytes = 0;
    while (last < n) {
      const ImageRowRequest& r = batch.rows[last];
      const size_t b = r.jpeg ? arena_image_bytes(r.height, r.width) : 0;
      if (last > first && bytes + b > kArenaBytes) break;
      bytes += b;
      ++last;
    }
    reserve_arena(std::max(bytes, std::min(kArenaBytes, bytes * 2)));
    make_part(batch, first, last, on_host, out, stream);
    first = last;
  }
}

void DeviceImageBatcher::make_part(const ImageBatchRequest& batch, size_t first, size_t last,
                                   const HostRowMaker& on_host, float* out, cudaStream_t stream) {
  const size_t row_floats = static_cast<size_t>(batch.image_size) * batch.image_size * 3;
  std::vector<ResampleRow> rows;
  std::vector<const uint8_t*> files;
  std::vector<size_t> sizes;
  std::vector<DeviceRgbImage> targets;
  std::vector<size_t> jpeg_rows;  // index into `rows` of each file
  size_t offset = 0;
  for (size_t i = first; i < last; ++i) {
    const ImageRowRequest& q = batch.rows[i];
    if (!q.jpeg) {  // made on the host: its floats go straight into the batch
      if (q.size != row_floats * sizeof(float))
        throw Error("row " + std::to_string(i) + " of a batch of images holds " + std::to_string(q.size) +
                    " bytes of floats, not a row's " + std::to_string(row_floats * sizeof(float)));
      check(cudaMemcpyAsync(out + i * row_floats, q.bytes, q.size, cudaMemcpyHostToDevice, stream),
            "copying a row made on the host to the GPU");
      ++host_rows_;
      continue;
    }
    ResampleRow r;
    r.pixels = arena_ + offset;
    r.pitch = static_cast<int64_t>(q.width) * 3;
    r.box_top = q.box_top, r.box_left = q.box_left, r.box_height = q.box_height, r.box_width = q.box_width;
    r.resize_height = q.resize_height, r.resize_width = q.resize_width;
    r.window_top = q.window_top, r.window_left = q.window_left;
    r.flip = q.flip ? 1 : 0;
    r.out_row = static_cast<int>(i);
    files.push_back(q.bytes);
    sizes.push_back(q.size);
    DeviceRgbImage t{arena_ + offset, static_cast<size_t>(r.pitch), q.height, q.width, {}};
    const bool inside = q.box_top >= 0 && q.box_left >= 0 && q.box_height > 0 && q.box_width > 0 &&
                        q.box_top + q.box_height <= q.height && q.box_left + q.box_width <= q.width;
    if (decode_regions_ && inside && (q.box_height < q.height || q.box_width < q.width))
      t.region = {q.box_top, q.box_left, q.box_height, q.box_width};
    targets.push_back(t);
    jpeg_rows.push_back(rows.size());
    rows.push_back(r);
    offset += arena_image_bytes(q.height, q.width);
  }
  const std::vector<Decoded> decoded = decoder_->decode(files, sizes, targets, stream);
  std::vector<bool> keep(rows.size(), true);
  for (size_t k = 0; k < jpeg_rows.size(); ++k) {
    if (decoded[k] == Decoded::region) {  // the box's pixels, in rows of their own width, at the same place
      const PixelBox& got = targets[k].region;
      ResampleRow& r = rows[jpeg_rows[k]];
      r.pitch = static_cast<int64_t>(got.width) * 3;
      r.box_top -= got.top, r.box_left -= got.left;
      ++region_rows_;
    }
    if (decoded[k] != Decoded::no) continue;
    keep[jpeg_rows[k]] = false;
    host_row_.resize(row_floats);
    const int row = rows[jpeg_rows[k]].out_row;
    on_host(row, host_row_.data());
    check(cudaMemcpyAsync(out + row * row_floats, host_row_.data(), row_floats * sizeof(float), cudaMemcpyHostToDevice,
                          stream),
          "copying a row made on the host to the GPU");
    check(cudaStreamSynchronize(stream), "copying a row made on the host to the GPU");
    ++host_rows_;
  }
  std::vector<ResampleRow> resampled;
  for (size_t k = 0; k < rows.size(); ++k)
    if (keep[k]) resampled.push_back(rows[k]);
  decoded_rows_ += static_cast<int64_t>(resampled.size());
  check(cudaMemcpyAsync(device_rows_, resampled.data(), resampled.size() * sizeof(ResampleRow), cudaMemcpyHostToDevice,
                        stream),
        "copying the resampling's rows to the GPU");
  launch_image_resample(device_rows_, static_cast<int>(resampled.size()), batch.image_size, batch.scale, batch.shift,
                        out, taps_, stream);
  // The arena, the rows and the host bytes are reused by the next part or batch. A host wait,
  // not an event the stream waits on: nvJPEG's hardware decoder is reported to write its output
  // when it is called, not after the work queued before it on the stream (nvJPEG 12.3–13.2 on
  // H100s), so the next decode must not be called before this resampling has read the arena.
  check(cudaStreamSynchronize(stream), "making a batch of images on the GPU");
}

}  // namespace trident::cuda
