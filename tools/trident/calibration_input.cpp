// The images `--calibration` names (calibration_input.h).
#include "calibration_input.h"

#include <filesystem>

#include "core/error.h"
#include "runtime/data/calibration_folder.h"
#include "runtime/npy.h"

namespace trident::cli {

HostTensor read_calibration_input(const std::string& path, const std::function<ir::Graph(int64_t)>& model_at,
                                  nlohmann::json& report) {
  HostTensor images;
  if (std::filesystem::is_directory(path)) {
    const ir::Graph one = model_at(1);
    const Shape x = one.value(one.values_with_role(ir::ValueRole::Input).at(0)).shape;  // NHWC
    if (x.size() != 4 || x[3] != 3 || x[1] != x[2])
      throw Error("--calibration with a folder needs a model of square RGB images; this one takes " + shape_str(x) +
                  " (NHWC): give an .npy file of its inputs instead");
    data::CalibrationFolder f = data::read_calibration_folder(path, static_cast<int>(x[1]));
    nlohmann::json folder = {{"images_listed", f.listed}, {"images_skipped", f.skipped}};
    if (f.skipped > 0) folder["first_skip"] = f.first_skip;
    report["calibration_folder"] = folder;
    images = std::move(f.images);
  } else {
    images = runtime::read_npy(path);
  }
  if (images.shape.empty() || images.shape[0] < 1)
    throw Error("--calibration '" + path + "' holds no images (shape " + shape_str(images.shape) + ")");
  return images;
}

}  // namespace trident::cli
