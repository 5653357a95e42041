// nvJPEG's batched decoder behind jpeg_batch_decoder.h. The handle takes the hardware backend
// where the GPU has JPEG engines and the GPU-assisted hybrid one elsewhere; a second, default
// handle decodes single images when a batch fails, to find the files at fault. Both take their
// memory from one NvjpegMemory (kept blocks, so nvJPEG's own frees do not wait for the device).
#include "backends/cuda/images/jpeg_batch_decoder.h"

#if TRIDENT_HAVE_NVJPEG_HEADER
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/images/nvjpeg_library.h"
#include "backends/cuda/images/nvjpeg_memory.h"
#endif

namespace trident::cuda {

#if TRIDENT_HAVE_NVJPEG_HEADER
namespace {

// One nvJPEG handle and its decoding state.
struct NvjpegSession {
  const NvjpegLibrary* lib = nullptr;
  nvjpegHandle_t handle = nullptr;
  nvjpegJpegState_t state = nullptr;

  bool open(const NvjpegLibrary* l, nvjpegBackend_t backend, NvjpegMemory& memory) {
    lib = l;
    if (lib->create_ex_v2(backend, memory.device_allocator(), memory.pinned_allocator(), 0, &handle) !=
        NVJPEG_STATUS_SUCCESS) {
      handle = nullptr;
      return false;
    }
    if (lib->state_create(handle, &state) != NVJPEG_STATUS_SUCCESS) {
      close();
      return false;
    }
    return true;
  }
  void close() {
    if (state) lib->state_destroy(state);
    if (handle) lib->destroy(handle);
    state = nullptr, handle = nullptr;
  }
};

class NvjpegBatchDecoder final : public JpegBatchDecoder {
 public:
  NvjpegBatchDecoder(const NvjpegLibrary* lib, std::unique_ptr<NvjpegMemory> memory, NvjpegSession batched,
                     bool hardware)
      : lib_(lib),
        memory_(std::move(memory)),
        batched_(batched),
        hardware_(hardware),
        region_align_(hardware && lib->decodes_regions() ? 1 : 0) {}
  ~NvjpegBatchDecoder() override {
    for (nvjpegDecodeParams_t p : params_) lib_->params_destroy(p);
    batched_.close();
    single_.close();
  }

  std::vector<Decoded> decode(const std::vector<const uint8_t*>& file, const std::vector<size_t>& size,
                              std::vector<DeviceRgbImage>& out, cudaStream_t stream) override {
    std::vector<Decoded> decoded(file.size(), Decoded::no);
    std::vector<size_t> batched, single;  // which files go to the batched decoder, which one by one
    for (size_t i = 0; i < file.size(); ++i)
      (!hardware_ || std::min(out[i].height, out[i].width) >= kHardwareJpegMinSide ? batched : single).push_back(i);
    if (!batched.empty() && !decode_batch(file, size, out, batched, stream, &decoded))
      single.insert(single.end(), batched.begin(), batched.end());
    if (single.empty()) return decoded;
    if (!single_.handle && !single_.open(lib_, NVJPEG_BACKEND_DEFAULT, *memory_))
      throw Error("nvJPEG could not start its single-image decoder");
    for (size_t i : single) {
      out[i].region = PixelBox{};
      nvjpegImage_t dst = image_of(out[i]);
      if (lib_->decode(single_.handle, single_.state, file[i], size[i], NVJPEG_OUTPUT_RGBI, &dst, stream) ==
          NVJPEG_STATUS_SUCCESS)
        decoded[i] = Decoded::whole;
    }
    cudaGetLastError();
    return decoded;
  }

  std::string description() const override {
    return "nvJPEG " + lib_->version + (hardware_ ? " on the hardware JPEG engines" : " on the CUDA cores");
  }

 private:
  static nvjpegImage_t image_of(const DeviceRgbImage& o) {
    nvjpegImage_t d{};
    d.channel[0] = o.data;
    d.pitch[0] = o.pitch;
    return d;
  }

  // Files `which` in one nvJPEG batch, by region where asked and the library takes regions;
  // false where it refuses the batch. A batch refused by region but taken whole means the
  // regions were at fault: the next batches widen them to whole blocks of 16 pixels, and if that
  // is refused too, decode whole images.
  bool decode_batch(const std::vector<const uint8_t*>& file, const std::vector<size_t>& size,
                    std::vector<DeviceRgbImage>& out, const std::vector<size_t>& which, cudaStream_t stream,
                    std::vector<Decoded>* decoded) {
    std::vector<const unsigned char*> data;
    std::vector<size_t> lengths;
    for (size_t i : which) data.push_back(file[i]), lengths.push_back(size[i]);
    const bool regions = region_align_ > 0 && std::any_of(which.begin(), which.end(), [&](size_t i) {
      return out[i].region.height > 0;
    });
    if (regions && initialize(out, which) && decode_regions(data, lengths, out, which, stream)) {
      for (size_t i : which) (*decoded)[i] = out[i].region.height > 0 ? Decoded::region : Decoded::whole;
      return true;
    }
    if (regions) failed();
    for (size_t i : which) out[i].region = PixelBox{};
    if (!initialize(out, which) || !decode_whole(data, lengths, out, which, stream)) {
      failed();
      return false;
    }
    if (regions) region_align_ = region_align_ == 1 ? 16 : 0;
    for (size_t i : which) (*decoded)[i] = Decoded::whole;
    return true;
  }

  // The batched state ready for `which` (its hardware buffers too); false where nvJPEG refuses.
  bool initialize(const std::vector<DeviceRgbImage>& out, const std::vector<size_t>& which) {
    const int n = static_cast<int>(which.size());
    if (initialized_ != n &&
        lib_->batched_initialize(batched_.handle, batched_.state, n, 1, NVJPEG_OUTPUT_RGBI) == NVJPEG_STATUS_SUCCESS) {
      initialized_ = n;
      reserved_ = Reserved{};
    }
    if (initialized_ != n) return false;
    if (hardware_) reserve(out, which);
    return true;
  }

  // A refused batch leaves the state to be initialised again.
  void failed() {
    initialized_ = -1;
    cudaGetLastError();
  }

  bool decode_whole(const std::vector<const unsigned char*>& data, const std::vector<size_t>& lengths,
                    const std::vector<DeviceRgbImage>& out, const std::vector<size_t>& which, cudaStream_t stream) {
    std::vector<nvjpegImage_t> dst;
    for (size_t i : which) dst.push_back(image_of(out[i]));
    return lib_->decode_batched(batched_.handle, batched_.state, data.data(), lengths.data(), dst.data(), stream) ==
           NVJPEG_STATUS_SUCCESS;
  }

  // nvjpegDecodeBatchedEx with each image's region widened to region_align_ (a whole image where
  // it has none).
  bool decode_regions(const std::vector<const unsigned char*>& data, const std::vector<size_t>& lengths,
                      std::vector<DeviceRgbImage>& out, const std::vector<size_t>& which, cudaStream_t stream) {
    while (params_.size() < which.size()) {
      nvjpegDecodeParams_t p = nullptr;
      if (lib_->params_create(batched_.handle, &p) != NVJPEG_STATUS_SUCCESS) return false;
      params_.push_back(p);
    }
    std::vector<nvjpegImage_t> dst;
    for (size_t k = 0; k < which.size(); ++k) {
      DeviceRgbImage& o = out[which[k]];
      nvjpegImage_t d = image_of(o);
      if (o.region.height > 0) {
        o.region = widened(o.region, o.height, o.width, region_align_);
        d.pitch[0] = static_cast<size_t>(o.region.width) * 3;
      }
      const PixelBox& r = o.region;
      const bool ok = lib_->params_set_output_format(params_[k], NVJPEG_OUTPUT_RGBI) == NVJPEG_STATUS_SUCCESS &&
                      (r.height > 0 ? lib_->params_set_roi(params_[k], r.left, r.top, r.width, r.height)
                                    : lib_->params_set_roi(params_[k], 0, 0, -1, -1)) == NVJPEG_STATUS_SUCCESS;
      if (!ok) return false;
      dst.push_back(d);
    }
    return lib_->decode_batched_ex(batched_.handle, batched_.state, data.data(), lengths.data(), dst.data(),
                                   params_.data(), stream) == NVJPEG_STATUS_SUCCESS;
  }

  // `box` grown outwards to multiples of `align` within an image of height x width.
  static PixelBox widened(PixelBox box, int height, int width, int align) {
    const int top = box.top / align * align, left = box.left / align * align;
    const int bottom = std::min(height, (box.top + box.height + align - 1) / align * align);
    const int right = std::min(width, (box.left + box.width + align - 1) / align * align);
    return {top, left, bottom - top, right - left};
  }

  // The hardware decoder's buffers, made for `which`'s largest image (at 4:4:4, the most memory
  // a subsampling needs) unless made that large before. Without it the library frees and
  // allocates them again as the images' sizes change, and each free waits for the whole device:
  // the training step beside the decoding. Sizes are rounded up, so they settle after a few
  // batches.
  void reserve(const std::vector<DeviceRgbImage>& out, const std::vector<size_t>& which) {
    Reserved want{static_cast<int>(which.size()), 0, 0};
    for (size_t i : which) {
      want.height = std::max(want.height, (out[i].height + 127) / 128 * 128);
      want.width = std::max(want.width, (out[i].width + 127) / 128 * 128);
    }
    if (want.batch <= reserved_.batch && want.height <= reserved_.height && want.width <= reserved_.width) return;
    want.batch = std::max(want.batch, reserved_.batch);
    want.height = std::max(want.height, reserved_.height);
    want.width = std::max(want.width, reserved_.width);
    if (lib_->batched_pre_allocate(batched_.handle, batched_.state, want.batch, want.width, want.height,
                                   NVJPEG_CSS_444, NVJPEG_OUTPUT_RGBI) == NVJPEG_STATUS_SUCCESS)
      reserved_ = want;
    cudaGetLastError();
  }

  struct Reserved {
    int batch = 0, height = 0, width = 0;
  };

  const NvjpegLibrary* lib_;
  std::unique_ptr<NvjpegMemory> memory_;  // outlives the sessions (the destructor closes them first)
  NvjpegSession batched_, single_;
  bool hardware_;
  int initialized_ = -1;  // the batch size the batched state was initialised for
  Reserved reserved_;     // what reserve() last made room for
  int region_align_;      // regions widened to multiples of this; 0: images decoded whole
  std::vector<nvjpegDecodeParams_t> params_;  // one per image of the largest region batch so far
};

}  // namespace

std::unique_ptr<JpegBatchDecoder> make_jpeg_batch_decoder(std::string* why) {
  const NvjpegLibrary* lib = nvjpeg_library(why);
  if (lib == nullptr) return nullptr;
  auto memory = std::make_unique<NvjpegMemory>();
  NvjpegSession s;
  if (s.open(lib, NVJPEG_BACKEND_HARDWARE, *memory))
    return std::make_unique<NvjpegBatchDecoder>(lib, std::move(memory), s, true);
  if (s.open(lib, NVJPEG_BACKEND_GPU_HYBRID, *memory) || s.open(lib, NVJPEG_BACKEND_DEFAULT, *memory))
    return std::make_unique<NvjpegBatchDecoder>(lib, std::move(memory), s, false);
  if (why) *why = "nvJPEG " + lib->version + " could not start a decoder on this GPU";
  return nullptr;
}

#else

std::unique_ptr<JpegBatchDecoder> make_jpeg_batch_decoder(std::string* why) {
  if (why) *why = "this build has no nvJPEG header (scripts/setup.sh fetches it)";
  return nullptr;
}

#endif

}  // namespace trident::cuda
