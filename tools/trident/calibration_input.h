// The images `--calibration` names, for `trident infer --precision int8` and `trident quantize`:
// an .npy file (NCHW, the model's input size) or a folder of images
// (runtime/data/calibration_folder.h), read for the model `model_at` builds.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/host_tensor.h"
#include "ir/graph.h"

namespace trident::cli {

// The images, and in `report` what a folder held ("calibration_folder": listed, skipped).
HostTensor read_calibration_input(const std::string& path, const std::function<ir::Graph(int64_t)>& model_at,
                                  nlohmann::json& report);

}  // namespace trident::cli
