// Batches of JPEG files decoded into interleaved RGB in device memory by nvJPEG: on the GPU's
// hardware JPEG engines where it has them (A100, H100, H200) for images of at least
// kHardwareJpegMinSide a side, else on its CUDA cores. A batch the library refuses as a whole is
// decoded again image by image, so one damaged file costs only itself.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trident::cuda {

// A box of an image's pixels.
struct PixelBox {
  int top = 0, left = 0, height = 0, width = 0;
};

// Where one image's pixels go: height rows of `pitch` bytes, width * 3 of them used. With a
// region (height > 0) the decoder may write only that box of the image instead, as rows of
// region.width * 3 bytes from `data`, after widening it to the alignment it needs.
struct DeviceRgbImage {
  uint8_t* data = nullptr;
  size_t pitch = 0;
  int height = 0, width = 0;
  PixelBox region;
};

// What became of one image: not decoded, decoded whole, or only its (possibly widened) region.
enum class Decoded : uint8_t { no, whole, region };

// Images with a side below this go to the CUDA cores instead of the hardware JPEG engines: on an
// H100, a network trained on 64x48 JPEGs decoded by the engines (which reported success) learned
// nothing from them, where JPEGs of 64x64 and up trained as the CPU's decoding did
// (GpuImages.TrainingDecodesOnTheGpu), and the CUDA cores' pixels match the CPU's at any size.
inline constexpr int kHardwareJpegMinSide = 64;

class JpegBatchDecoder {
 public:
  virtual ~JpegBatchDecoder() = default;
  // Decodes file i (size[i] bytes of host memory) into out[i] on `stream`, only its region where
  // it has one and the decoder can (out[i].region then says which box was written). The host
  // bytes may be rewritten once this returns.
  virtual std::vector<Decoded> decode(const std::vector<const uint8_t*>& file, const std::vector<size_t>& size,
                                      std::vector<DeviceRgbImage>& out, cudaStream_t stream) = 0;
  // "nvJPEG 13.0.0 on the hardware JPEG engines" or "... on the CUDA cores".
  virtual std::string description() const = 0;
};

// A decoder, or null with the reason in *why (no nvJPEG library, a build without its header).
std::unique_ptr<JpegBatchDecoder> make_jpeg_batch_decoder(std::string* why);

}  // namespace trident::cuda
