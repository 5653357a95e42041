// int8 calibration images from a folder of the user's images (`trident infer --precision int8
// --calibration DIR`): an ImageFolder root, one split, or any folder of .jpg/.jpeg/.png files.
// Up to `max_images` files (fewer where they would pass kCalibrationFolderBytes), spread over the whole sorted listing (every k-th), each decoded
// through the checked image reader, resized and centre-cropped to the model's side as
// evaluation does, and normalised with ImageNet's mean and std (torchvision's recipe, the one
// trident's image-folder training uses). An unreadable image is skipped and counted.
#pragma once
#include <cstdint>
#include <string>

#include "core/host_tensor.h"

namespace trident::data {

inline constexpr int64_t kCalibrationFolderImages = 256;
// ...and no more than fit in this many bytes as f32 (fewer images for a model of large inputs).
inline constexpr int64_t kCalibrationFolderBytes = int64_t{256} << 20;
// The most files a listing keeps (a larger tree is sampled from its first ones).
inline constexpr int64_t kCalibrationFolderListing = int64_t{1} << 20;

struct CalibrationFolder {
  HostTensor images;  // [N, 3, size, size] f32, NCHW
  int64_t listed = 0;   // image files found
  int64_t skipped = 0;  // of those chosen, the unreadable ones
  std::string first_skip;  // why the first skipped one was, or ""
};

// An Error (one sentence) where `dir` is no folder or no chosen image could be read.
CalibrationFolder read_calibration_folder(const std::string& dir, int size, int64_t max_images = kCalibrationFolderImages);

}  // namespace trident::data
