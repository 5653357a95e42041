// trident::Network: compiling (the device resolved and every option checked first, so a bad
// one is a sentence before anything is built) and inference on host or device buffers. Images
// cross the boundary in the caller's layout and are converted once, into the input's host copy.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "api/model_impl.h"
#include "api/network_impl.h"
#include "api/network_int8.h"
#include "backends/kernel.h"
#include "core/error.h"
#include "core/tensor_layout.h"
#include "runtime/checkpoint/weight_file.h"
#include "runtime/device.h"
#include "runtime/train_limits.h"

namespace trident {

namespace {

// The backend for options.device, with the library's words for the CLI's --device sentences.
std::string resolve_backend(const CompileOptions& options, std::vector<std::string>& notices) {
  const std::string& device = options.device;
  const std::vector<std::string> backends = KernelRegistry::backends();
  if (device != "cpu" && device != "cuda" && device != "auto" &&
      std::find(backends.begin(), backends.end(), device) == backends.end())
    throw Error("unknown device '" + device + "'; the devices are " + runtime::kDeviceChoices);
  if (device == "cuda" && !runtime::gpu_unavailable_reason().empty())
    throw Error("device cuda: " + runtime::gpu_unavailable_reason());
  std::string notice;
  const std::string backend = runtime::backend_for_device(device, &notice);
  if (!notice.empty()) notices.push_back(notice);
  if (options.precision == Precision::int8 && backend == "cuda")
    throw Error("precision int8 runs on the CPU backends (cpu, cpu_ref); the cuda backend has no int8 convolution yet");
  if ((options.precision == Precision::fp16 || options.precision == Precision::bf16) && backend != "cuda")
    throw Error(std::string("precision ") + (options.precision == Precision::fp16 ? "fp16" : "bf16") +
                " needs the cuda device; the CPU backends run fp32");
  return backend;
}

DType activation_dtype(Precision p) {
  return p == Precision::fp16 ? DType::f16 : p == Precision::bf16 ? DType::bf16 : DType::f32;
}

int output_value(const runtime::Executable& exe) {
  const std::vector<int>& outputs = exe.graph().outputs();
  if (outputs.empty()) throw Error("the network has no output");
  return outputs[0];
}

TensorView checked_f32(const runtime::Executable& exe, int value, bool on_host) {
  TensorView v = on_host ? exe.host_view(value) : exe.view(value);
  if (v.dtype != DType::f32)
    throw Error("the network's '" + exe.graph().value(value).name + "' is " + std::string(dtype_name(v.dtype)) +
                "; the library passes f32 buffers only");
  return v;
}

Shape in_layout(Shape nhwc, Layout layout) {
  if (layout == Layout::nchw && nhwc.size() == 4) return {nhwc[0], nhwc[3], nhwc[1], nhwc[2]};
  return nhwc;
}

std::string layout_name(Layout layout) { return layout == Layout::nchw ? "NCHW" : "NHWC"; }

HostTensor f32_tensor(const Shape& shape, const float* data) {
  HostTensor t{shape, DType::f32, std::vector<std::byte>(static_cast<size_t>(numel(shape)) * 4)};
  std::memcpy(t.data.data(), data, t.data.size());
  return t;
}

}  // namespace

namespace api {

void check_limit(const runtime::TrainLimit& limit, double value, const std::string& field) {
  if (limit.allows(value)) return;
  std::ostringstream os;
  os << field << " must be " << limit.range() << ", not " << value;
  throw Error(os.str());
}

void write_images(runtime::Executable& exe, int value, std::span<const float> images, Layout layout) {
  TensorView dst = checked_f32(exe, value, true);
  const Shape shape = in_layout(dst.shape, layout);
  if (images.size() != static_cast<size_t>(dst.numel()))
    throw Error("the input holds " + std::to_string(images.size()) + " floats, but the network takes " +
                std::to_string(dst.numel()) + ": a batch " + shape_str(shape) + " in " + layout_name(layout));
  if (shape != dst.shape) {
    const HostTensor nhwc = nchw_to_nhwc(f32_tensor(shape, images.data()));
    std::memcpy(dst.data, nhwc.data.data(), dst.bytes());
  } else {
    std::memcpy(dst.data, images.data(), dst.bytes());
  }
  exe.upload(value);
}

}  // namespace api

runtime::Executable& Network::Impl::inference_executable() {
  if (inference) return *inference;
  if (!eval_current) trainer->eval_executable().copy_weights_from(trainer->train_executable());
  eval_current = true;
  return trainer->eval_executable();
}

runtime::Executable& Network::Impl::weights_executable() {
  return inference ? *inference : trainer->train_executable();
}

runtime::Trainer& Network::Impl::require_training(const char* what) {
  if (!trainer)
    throw Error(std::string(what) + " needs a network compiled with Mode::training; this one is for inference");
  return *trainer;
}

Network::Network(const Model& model, const CompileOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& n = *impl_;
  n.mode = options.mode;
  n.model = model.name();
  n.seed = options.seed;
  n.learning_rate = options.learning_rate;
  const bool train = options.mode == Mode::training;
  if (options.batch != 0 || !model.impl_->onnx || train)
    api::check_limit(runtime::kBatchLimit, static_cast<double>(options.batch), "CompileOptions::batch");
  if (train && options.precision == Precision::int8)
    throw Error("precision int8 is for inference; train in fp32 (or fp16/bf16 on cuda), then compile for inference in int8");
  if (train) {
    api::check_limit(runtime::kLrLimit, options.learning_rate, "CompileOptions::learning_rate");
    api::check_limit(runtime::kMomentumLimit, options.momentum, "CompileOptions::momentum");
    api::check_limit(runtime::kWeightDecayLimit, options.weight_decay, "CompileOptions::weight_decay");
    api::check_limit(runtime::kBeta1Limit, options.beta1, "CompileOptions::beta1");
    api::check_limit(runtime::kBeta2Limit, options.beta2, "CompileOptions::beta2");
    api::check_limit(runtime::kAdamEpsLimit, options.eps, "CompileOptions::eps");
  }
  n.backend = resolve_backend(options, n.notices);

  frontend::LoadedModel built = api::build_graph(*model.impl_, options.batch, train);
  n.notices.insert(n.notices.end(), built.notices.begin(), built.notices.end());
  n.info = built.info;
  n.model_path = built.path;
  n.model_crc = built.file_crc;
  if (const std::string bad = runtime::non_finite_tensor(built.weights); !bad.empty()) {
    const std::string sentence = "'" + model.name() + "' holds NaN or infinite values (in initializer '" + bad + "')";
    if (train) throw Error(sentence + "; training from them can only give NaN");
    n.notices.push_back(sentence + "; the outputs that depend on them will be NaN");
  }
  passes::CompileOptions compile =
      runtime::default_compile_options(train ? passes::Mode::Train : passes::Mode::Infer);
  compile.backend = n.backend;
  compile.precision = activation_dtype(options.precision);
  compile.momentum = options.momentum;
  compile.weight_decay = options.weight_decay;
  compile.nesterov = options.nesterov;
  compile.optimizer_kind = options.optimizer == Optimizer::adamw ? passes::OptimizerKind::AdamW : passes::OptimizerKind::Sgd;
  compile.beta1 = options.beta1;
  compile.beta2 = options.beta2;
  compile.adam_eps = options.eps;
  BackendOptions backend;
  backend.deterministic = options.deterministic;
  backend.plan_cache_dir = options.plan_cache_dir;
  compile.label_smoothing = options.label_smoothing;
  if (train) api::check_limit(runtime::kLabelSmoothingLimit, options.label_smoothing, "CompileOptions::label_smoothing");
  if (train) {
    runtime::TrainConfig config;
    config.compile = compile;
    config.backend_options = backend;
    config.lr = options.learning_rate;
    config.seed = options.seed;
    n.trainer = std::make_unique<runtime::Trainer>(built.graph, config);
    if (!built.weights.empty()) n.trainer->train_executable().import_weights(built.weights, false);
  } else {
    if (options.precision == Precision::int8) {
      api::Int8Calibration int8 = api::calibrate_int8(*model.impl_, options, built, compile, backend);
      compile = std::move(int8.compile);
      n.notices.push_back(int8.notice);
    } else if (!options.calibration_images.empty()) {
      throw Error("CompileOptions::calibration_images are for Precision::int8");
    }
    n.inference = runtime::Executable::compile(built.graph, compile, backend);
    if (built.weights.empty()) n.inference->init_parameters(options.seed);
    else n.inference->import_weights(built.weights, true);
  }
  n.model_graph = std::move(built.graph);
}

Network::Network(Network&&) noexcept = default;
Network& Network::operator=(Network&&) noexcept = default;
Network::~Network() = default;

Mode Network::mode() const { return impl_->mode; }
const std::string& Network::backend() const { return impl_->backend; }
const std::vector<std::string>& Network::notices() const { return impl_->notices; }

std::vector<int64_t> Network::input_shape(Layout layout) const {
  const runtime::Executable& exe = impl_->inference ? *impl_->inference : impl_->trainer->eval_executable();
  return in_layout(exe.find(api::kImagesInput).shape, layout);
}

std::vector<int64_t> Network::output_shape() const {
  const runtime::Executable& exe = impl_->inference ? *impl_->inference : impl_->trainer->eval_executable();
  return exe.view(output_value(exe)).shape;
}

int64_t Network::batch() const { return input_shape()[0]; }
size_t Network::input_size() const { return static_cast<size_t>(numel(input_shape())); }
size_t Network::output_size() const { return static_cast<size_t>(numel(output_shape())); }

void Network::infer(std::span<const float> images, std::span<float> out, Layout layout) {
  const std::lock_guard<std::recursive_mutex> lock(impl_->mutex);
  runtime::Executable& exe = impl_->inference_executable();
  const int output = output_value(exe);
  const Shape in_shape = in_layout(exe.view(exe.value_id(api::kImagesInput)).shape, layout);
  const Shape out_shape = in_layout(exe.view(output).shape, layout);
  const int64_t batch = in_shape[0];
  const size_t per_image = static_cast<size_t>(numel(in_shape) / batch), per_result = static_cast<size_t>(numel(out_shape) / batch);
  if (images.empty() || images.size() % per_image != 0)
    throw Error("the input holds " + std::to_string(images.size()) + " floats, which are no whole number of images: the "
                "network takes " + std::to_string(numel(in_shape)) + " floats a batch, " + shape_str(in_shape) + " in " +
                layout_name(layout) + " (" + std::to_string(per_image) + " an image)");
  const size_t count = images.size() / per_image;
  Shape want = out_shape;
  want[0] = static_cast<int64_t>(count);
  if (out.size() != count * per_result)
    throw Error("the output buffer holds " + std::to_string(out.size()) + " floats, but " + std::to_string(count) +
                " image" + (count == 1 ? "" : "s") + " give " + shape_str(want) + ", " +
                std::to_string(count * per_result) + " floats");
  // Any number of images: a batch at a time, the last one padded with zeros.
  std::vector<float> padded;
  for (size_t first = 0; first < count; first += static_cast<size_t>(batch)) {
    const size_t n = std::min<size_t>(static_cast<size_t>(batch), count - first);
    std::span<const float> chunk = images.subspan(first * per_image, n * per_image);
    if (n < static_cast<size_t>(batch)) {
      padded.assign(static_cast<size_t>(batch) * per_image, 0.f);
      std::copy(chunk.begin(), chunk.end(), padded.begin());
      chunk = padded;
    }
    api::write_images(exe, exe.value_id(api::kImagesInput), chunk, layout);
    exe.run();
    exe.download(output);
    const TensorView result = checked_f32(exe, output, true);
    float* dst = out.data() + first * per_result;
    if (out_shape != result.shape) {
      const HostTensor converted = nhwc_to_nchw(f32_tensor(result.shape, result.as<float>()));
      std::memcpy(dst, converted.data.data(), n * per_result * sizeof(float));
    } else {
      std::memcpy(dst, result.data, n * per_result * sizeof(float));
    }
  }
}

std::vector<float> Network::infer(std::span<const float> images, Layout layout) {
  const std::lock_guard<std::recursive_mutex> lock(impl_->mutex);
  const size_t per_image = input_size() / static_cast<size_t>(batch());
  const size_t count = per_image ? images.size() / per_image : 0;
  std::vector<float> out(count * (output_size() / static_cast<size_t>(batch())));
  infer(images, out, layout);
  return out;
}

std::vector<float> Network::probabilities(std::span<const float> images, Layout layout) {
  const std::lock_guard<std::recursive_mutex> lock(impl_->mutex);
  const Shape shape = output_shape();
  if (shape.size() != 2)
    throw Error("probabilities need a [batch, classes] output, but this network's is " + shape_str(shape));
  std::vector<float> p = infer(images, layout);
  const int64_t rows = static_cast<int64_t>(p.size()) / shape[1];
  for (int64_t r = 0; r < rows; ++r) {
    float* row = p.data() + r * shape[1];
    const float top = *std::max_element(row, row + shape[1]);
    double sum = 0;
    for (int64_t k = 0; k < shape[1]; ++k) sum += std::exp(static_cast<double>(row[k]) - top);
    for (int64_t k = 0; k < shape[1]; ++k) row[k] = static_cast<float>(std::exp(static_cast<double>(row[k]) - top) / sum);
  }
  return p;
}

void Network::infer_device(const float* images, float* out) {
  const std::lock_guard<std::recursive_mutex> lock(impl_->mutex);
  runtime::Executable& exe = impl_->inference_executable();
  if (!exe.on_device())
    throw Error("infer_device takes device memory, which the '" + impl_->backend +
                "' backend does not use; compile for device cuda, or call infer with host buffers");
  if (!images || !out) throw Error("infer_device needs a device pointer for the images and one for the output");
  const int input = exe.value_id(api::kImagesInput), output = output_value(exe);
  const TensorView in = checked_f32(exe, input, false), result = checked_f32(exe, output, false);
  exe.context().copy_within(in.data, images, in.bytes());
  exe.run();
  exe.context().copy_within(out, result.data, result.bytes());
}

}  // namespace trident
