// Precision::int8 in the API: the calibration `trident infer --precision int8 --calibration`
// runs (runtime/int8_calibration.h), on the images CompileOptions hold.
#pragma once
#include <string>

#include "api/model_impl.h"
#include "backends/backend_options.h"
#include "passes/pass.h"
#include "trident/network.h"

namespace trident::api {

struct Int8Calibration {
  passes::CompileOptions compile;  // the inference options, set to quantize with the measured ranges
  std::string notice;              // what was calibrated on what, one sentence
};

// `compile` calibrated on options.calibration_images for `model` as `built` (its graph at the
// network's batch, and its weights); an Error sentence where the images are missing or not of
// the model's input size.
Int8Calibration calibrate_int8(const Model::Impl& model, const CompileOptions& options,
                               const frontend::LoadedModel& built, const passes::CompileOptions& compile,
                               const BackendOptions& backend);

}  // namespace trident::api
