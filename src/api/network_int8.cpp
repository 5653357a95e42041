// Precision::int8 in the API (api/network_int8.h).
#include "api/network_int8.h"

#include <cstring>

#include "core/error.h"
#include "runtime/int8_calibration.h"
#include "runtime/runner.h"

namespace trident::api {

Int8Calibration calibrate_int8(const Model::Impl& model, const CompileOptions& options,
                               const frontend::LoadedModel& built, const passes::CompileOptions& compile,
                               const BackendOptions& backend) {
  const Shape nhwc = built.graph.value(built.graph.find_value(kImagesInput)).shape;
  if (nhwc.size() != 4) throw Error("precision int8 needs a model of image batches [N,C,H,W]");
  const Shape image{nhwc[3], nhwc[1], nhwc[2]};
  const size_t per_image = static_cast<size_t>(numel(image));
  const std::span<const float> given = options.calibration_images;
  if (given.empty())
    throw Error("precision int8 needs CompileOptions::calibration_images: images like those the network will see "
                "(NCHW floats, a few hundred), on which each layer's range is measured");
  if (given.size() % per_image != 0)
    throw Error("CompileOptions::calibration_images hold " + std::to_string(given.size()) +
                " floats, not a whole number of the model's " + shape_str(image) + " images (NCHW)");
  const int64_t count = static_cast<int64_t>(given.size() / per_image);
  runtime::HostTensor images{{count, image[0], image[1], image[2]}, DType::f32,
                             std::vector<std::byte>(given.size() * sizeof(float))};
  std::memcpy(images.data.data(), given.data(), images.data.size());
  const runtime::Calibrator calibrator = runtime::parse_calibrator(options.calibrator);
  runtime::CalibrationResult measured;
  Int8Calibration out;
  out.compile = runtime::calibrate_network(
      [&](int64_t batch) { return build_graph(model, batch, false).graph; },
      [&](runtime::Runner& r) {
        if (built.weights.empty()) r.init_random_weights(options.seed);
        else r.load_weights(built.weights, true);
      },
      compile, backend, images, calibrator, measured);
  out.notice = "int8: the convolution inputs' ranges were calibrated on " + std::to_string(measured.images) +
               " images (" + runtime::calibrator_name(calibrator) + ")";
  return out;
}

}  // namespace trident::api
