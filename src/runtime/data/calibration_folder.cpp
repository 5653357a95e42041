// Calibration images from a folder (calibration_folder.h).
#include "runtime/data/calibration_folder.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "runtime/data/image_codec.h"
#include "runtime/data/image_transform.h"

namespace trident::data {

namespace fs = std::filesystem;

namespace {

// The image files under `dir` (links to folders are not followed, so a loop cannot trap it).
std::vector<std::string> list_images(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error("--calibration '" + dir + "' is neither an .npy file of images nor a folder of them");
  std::vector<std::string> files;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end && static_cast<int64_t>(files.size()) < kCalibrationFolderListing; it.increment(ec)) {
    const fs::directory_entry& e = *it;
    if (has_image_extension(e.path().filename().string()) && e.is_regular_file(ec)) files.push_back(e.path().string());
  }
  if (ec) throw Error("--calibration '" + dir + "' could not be listed: " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

CalibrationFolder read_calibration_folder(const std::string& dir, int size, int64_t max_images) {
  const std::vector<std::string> files = list_images(dir);
  CalibrationFolder out;
  out.listed = static_cast<int64_t>(files.size());
  if (files.empty()) throw Error("--calibration '" + dir + "' holds no .jpg, .jpeg or .png image");
  if (size < 1 || size > kMaxResizedSide) throw Error("calibration images of side " + std::to_string(size) + " are not possible");
  const size_t per_image = static_cast<size_t>(3) * size * size;
  const int64_t fit = std::max<int64_t>(1, kCalibrationFolderBytes / static_cast<int64_t>(per_image * sizeof(float)));
  const int64_t chosen = std::min({max_images, out.listed, fit});
  std::vector<float> nhwc(per_image);
  std::vector<float> nchw;
  nchw.reserve(per_image * static_cast<size_t>(chosen));
  int64_t kept = 0;
  for (int64_t k = 0; k < chosen; ++k) {
    const std::string& path = files[static_cast<size_t>(k * out.listed / chosen)];
    try {
      eval_transform(read_image_file(path), size, kImageNetNormalisation, nhwc.data());
    } catch (const Error& e) {
      if (out.skipped++ == 0) out.first_skip = e.what();
      continue;
    }
    const size_t base = nchw.size();
    nchw.resize(base + per_image);
    for (size_t p = 0; p < static_cast<size_t>(size) * size; ++p)
      for (size_t c = 0; c < 3; ++c) nchw[base + c * size * size + p] = nhwc[p * 3 + c];
    ++kept;
  }
  if (kept == 0)
    throw Error("--calibration '" + dir + "': none of the " + std::to_string(chosen) + " images chosen could be read (" +
                out.first_skip + ")");
  out.images.shape = {kept, 3, size, size};
  out.images.dtype = DType::f32;
  out.images.data.resize(nchw.size() * sizeof(float));
  std::memcpy(out.images.data.data(), nchw.data(), out.images.data.size());
  return out;
}

}  // namespace trident::data
