// trident.Network: CompileOptions as keyword arguments (enums as their names),
// NumPy arrays in and out of inference and training, DLPack arrays for
// infer_device. The GIL is released while the engine computes, so other Python
// threads run meanwhile.
#include <optional>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "arrays.h"
#include "bindings.h"
#include "dlpack.h"
#include "trident/trident.h"

namespace py = pybind11;

namespace trident::python {

namespace {

// `name` as one of `names` (each naming the enum value of the same index), or
// an Error listing them.
template <typename Enum, size_t N>
Enum enum_named(const std::string& name, const char* what, const char* const (&names)[N]) {
  std::string choices;
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return static_cast<Enum>(i);
    choices += std::string(i == 0 ? "" : i + 1 == N ? " and " : ", ") + names[i];
  }
  throw Error("unknown " + std::string(what) + " '" + name + "'; the " + what + "s are " + choices);
}

constexpr const char* kModes[] = {"inference", "training"};
constexpr const char* kPrecisions[] = {"fp32", "fp16", "bf16", "int8"};
constexpr const char* kLayouts[] = {"nchw", "nhwc"};
constexpr const char* kOptimizers[] = {"sgd", "adamw"};

Layout layout_named(const std::string& name) { return enum_named<Layout>(name, "layout", kLayouts); }

// What infer returns in `layout`: output_shape() is NHWC for a 4-D output.
std::vector<int64_t> output_shape(const Network& net, Layout layout) {
  std::vector<int64_t> s = net.output_shape();
  if (layout == Layout::nchw && s.size() == 4) s = {s[0], s[3], s[1], s[2]};
  return s;
}

FloatArray infer_array(Network& net, py::object images, const std::string& layout_name, bool probabilities) {
  const Layout layout = layout_named(layout_name);
  const FloatArray in = any_images_array(images, net.input_shape(layout), layout == Layout::nchw ? "NCHW" : "NHWC");
  std::vector<int64_t> shape = output_shape(net, layout);
  shape[0] = in.shape(0);  // one result per image, whatever the batch
  FloatArray out(shape);
  const std::span<const float> src(in.data(), static_cast<size_t>(in.size()));
  float* dst = out.mutable_data();
  {
    py::gil_scoped_release release;
    if (probabilities) {
      const std::vector<float> p = net.probabilities(src, layout);
      std::copy(p.begin(), p.end(), dst);
    } else {
      net.infer(src, std::span<float>(dst, static_cast<size_t>(out.size())), layout);
    }
  }
  return out;
}

py::dict epoch_dict(const EpochResult& e) {
  return py::dict(py::arg("epoch") = e.epoch, py::arg("loss") = e.loss, py::arg("accuracy") = e.accuracy,
                  py::arg("seconds") = e.seconds, py::arg("images_per_second") = e.images_per_second,
                  py::arg("learning_rate") = e.learning_rate, py::arg("data_wait_seconds") = e.data_wait_seconds,
                  py::arg("eval_loss") = e.eval_loss, py::arg("eval_accuracy") = e.eval_accuracy,
                  py::arg("eval_top5_accuracy") = e.eval_top5_accuracy, py::arg("eval_images") = e.eval_images,
                  py::arg("skipped") = e.skipped, py::arg("skipped_images") = e.skipped_images,
                  py::arg("decoded_by") = e.decoded_by);
}

py::dict train_result_dict(const TrainResult& r) {
  py::list epochs;
  for (const EpochResult& e : r.epochs) epochs.append(epoch_dict(e));
  return py::dict(py::arg("epochs") = epochs, py::arg("eval_split") = r.eval_split, py::arg("test_loss") = r.test_loss,
                  py::arg("test_accuracy") = r.test_accuracy, py::arg("test_top5_accuracy") = r.test_top5_accuracy,
                  py::arg("test_images") = r.test_images);
}

}  // namespace

void bind_network(py::module_& m) {
  py::class_<Network>(m, "Network", "A Model compiled for one mode, device, precision and batch.")
      .def(py::init([](const Model& model, const std::string& mode, const std::string& device,
                       const std::string& precision, int64_t batch, uint64_t seed, const std::string& optimizer,
                       std::optional<double> learning_rate, double momentum, std::optional<double> weight_decay,
                       bool nesterov, double beta1, double beta2, double eps, bool deterministic,
                       double label_smoothing, const std::string& plan_cache, py::object calibration,
                       const std::string& calibrator) {
             CompileOptions o;
             FloatArray images;  // held while the network compiles
             if (!calibration.is_none()) {
               images = calibration_array(calibration);
               o.calibration_images = {images.data(), static_cast<size_t>(images.size())};
             }
             o.calibrator = calibrator;
             o.optimizer = enum_named<Optimizer>(optimizer, "optimizer", kOptimizers);
             // Unset: the optimizer's PyTorch defaults (SGD's are CompileOptions').
             const bool adamw = o.optimizer == Optimizer::adamw;
             o.mode = enum_named<Mode>(mode, "mode", kModes);
             o.device = device;
             o.precision = enum_named<Precision>(precision, "precision", kPrecisions);
             o.batch = batch;
             o.seed = seed;
             o.learning_rate = learning_rate.value_or(adamw ? 1e-3 : o.learning_rate);
             o.momentum = momentum;
             o.weight_decay = weight_decay.value_or(adamw ? 0.01 : o.weight_decay);
             o.nesterov = nesterov;
             o.beta1 = beta1;
             o.beta2 = beta2;
             o.eps = eps;
             o.deterministic = deterministic;
             o.label_smoothing = label_smoothing;
             o.plan_cache_dir = plan_cache;
             py::gil_scoped_release release;
             return Network(model, o);
           }),
           py::arg("model"), py::kw_only(), py::arg("mode") = "inference", py::arg("device") = "cpu",
           py::arg("precision") = "fp32", py::arg("batch") = 1, py::arg("seed") = 1, py::arg("optimizer") = "sgd",
           py::arg("learning_rate") = py::none(), py::arg("momentum") = 0.9, py::arg("weight_decay") = py::none(),
           py::arg("nesterov") = false, py::arg("beta1") = 0.9, py::arg("beta2") = 0.999, py::arg("eps") = 1e-8,
           py::arg("deterministic") = false, py::arg("label_smoothing") = 0.0, py::arg("plan_cache") = "",
           py::arg("calibration") = py::none(), py::arg("calibrator") = "entropy",
           "Compiles `model`: mode inference or training; device cpu, cpu_ref, cuda or auto; precision fp32, fp16 or "
           "bf16 (cuda), int8 (CPU inference); batch 0 keeps an ONNX file's batch in inference; training: optimizer sgd (momentum, nesterov) or "
           "adamw (torch.optim.AdamW: beta1, beta2, eps), learning_rate and weight_decay for both (unset: 0.05 and "
           "5e-4 for sgd, 0.001 and 0.01 for adamw), label_smoothing (PyTorch's); deterministic: the same bits on "
           "every run (and on the CPU at every thread count), slower; plan_cache: a folder where CPU inference keeps the "
           "convolution choices it timed, for the next compile on this machine (empty: none); precision int8 (CPU "
           "inference): calibration, float32 NCHW images like those the network will see, on which each convolution "
           "input's range is measured, and calibrator entropy, percentile or max (a QDQ model needs neither).")
      .def_property_readonly("mode", [](const Network& n) { return kModes[static_cast<int>(n.mode())]; })
      .def_property_readonly("backend", &Network::backend, "The backend that runs: cpu, cpu_ref or cuda.")
      .def_property_readonly("notices", &Network::notices, "What compiling chose or changed, one sentence each.")
      .def_property_readonly("batch", &Network::batch)
      .def_property_readonly(
          "input_shape", [](const Network& n) { return n.input_shape(Layout::nchw); }, "The images infer takes, NCHW.")
      .def_property_readonly(
          "output_shape", [](const Network& n) { return output_shape(n, Layout::nchw); },
          "What infer returns for NCHW images: [batch, classes] for a classifier.")
      .def(
          "infer", [](Network& n, py::object x, const std::string& layout) { return infer_array(n, x, layout, false); },
          py::arg("images"), py::kw_only(), py::arg("layout") = "nchw",
          "Runs float32 images (NCHW unless layout='nhwc'), any number of them, a batch at a time; returns the "
          "first output of each.")
      .def(
          "probabilities",
          [](Network& n, py::object x, const std::string& layout) { return infer_array(n, x, layout, true); },
          py::arg("images"), py::kw_only(), py::arg("layout") = "nchw",
          "infer with each row of a [batch, classes] output turned into probabilities (softmax).")
      .def(
          "infer_device",
          [](Network& n, py::object images, py::object out) {
            const DeviceArray in(images, "images", n.input_shape(Layout::nhwc));
            const DeviceArray result(out, "output", n.output_shape());
            py::gil_scoped_release release;
            n.infer_device(in.data(), result.data());
          },
          py::arg("images"), py::arg("out"),
          "Runs one batch on a cuda network from and into CUDA arrays with __dlpack__ (images NHWC, out as "
          "output_shape, both float32); returns when out is written.")
      .def(
          "train_step",
          [](Network& n, py::object images, py::object labels, const std::string& layout_name) {
            const Layout layout = layout_named(layout_name);
            const FloatArray in = images_array(images, n.input_shape(layout), layout == Layout::nchw ? "NCHW" : "NHWC");
            const std::vector<int32_t> l = labels_vector(labels, n.batch());
            py::gil_scoped_release release;
            return n.train_step(std::span<const float>(in.data(), static_cast<size_t>(in.size())), l, layout);
          },
          py::arg("images"), py::arg("labels"), py::kw_only(), py::arg("layout") = "nchw",
          "One SGD step on one batch (labels: int32 or int64 class indices); returns the loss before the update.")
      .def("set_learning_rate", &Network::set_learning_rate, py::arg("lr"), "The rate train_step uses from now on.")
      .def(
          "train",
          [](Network& n, const std::filesystem::path& data_dir, int64_t epochs, double warmup_epochs,
             std::vector<int64_t> lr_steps, double lr_gamma, int64_t train_limit, int64_t test_limit, int image_size,
             int workers, const std::string& decode, std::optional<std::filesystem::path> save,
             std::optional<std::filesystem::path> log, py::object on_epoch) {
            TrainOptions o;
            o.epochs = epochs;
            o.warmup_epochs = warmup_epochs;
            o.lr_steps = std::move(lr_steps);
            o.lr_gamma = lr_gamma;
            o.train_limit = train_limit;
            o.test_limit = test_limit;
            o.image_size = image_size;
            o.workers = workers;
            o.decode = decode;
            if (save) o.save_path = save->string();
            if (log) o.log_path = log->string();
            if (!on_epoch.is_none()) {
              if (!PyCallable_Check(on_epoch.ptr())) throw Error("on_epoch must be callable (it is given each epoch's dict)");
              o.on_epoch = [on_epoch](const EpochResult& e) {
                py::gil_scoped_acquire gil;  // the engine runs without it
                on_epoch(epoch_dict(e));
              };
            }
            TrainResult r;
            {
              py::gil_scoped_release release;
              r = n.train(data_dir.string(), o);
            }
            return train_result_dict(r);
          },
          py::arg("data_dir"), py::kw_only(), py::arg("epochs") = 1, py::arg("warmup_epochs") = 0.2,
          py::arg("lr_steps") = std::vector<int64_t>{}, py::arg("lr_gamma") = 0.1, py::arg("train_limit") = 0,
          py::arg("test_limit") = 0, py::arg("image_size") = 0, py::arg("workers") = 0, py::arg("decode") = "auto",
          py::arg("save") = py::none(), py::arg("log") = py::none(), py::arg("on_epoch") = py::none(),
          "Trains over a dataset folder as `trident train --data` reads it (Fashion-MNIST, CIFAR-10, or an image "
          "folder DIR/train/<class>/, DIR/val/<class>/ whose classes and crop size are the network's), evaluating "
          "after every epoch; lr_steps/lr_gamma: a step schedule instead of the cosine; save: a checkpoint after "
          "every epoch; log: one JSON line per epoch; on_epoch(dict) after every epoch. Returns a dict: 'epochs' "
          "(dicts: epoch, loss, accuracy, seconds, images_per_second, learning_rate, data_wait_seconds, eval_loss, "
          "eval_accuracy, eval_top5_accuracy, eval_images, skipped), 'eval_split', 'test_loss', 'test_accuracy', "
          "'test_top5_accuracy', 'test_images'.")
      .def(
          "evaluate",
          [](Network& n, const std::filesystem::path& data_dir, int64_t limit, int image_size, int workers) {
            EvalResult r;
            {
              py::gil_scoped_release release;
              r = n.evaluate(data_dir.string(), {limit, image_size, workers});
            }
            return py::dict(py::arg("split") = r.split, py::arg("loss") = r.loss, py::arg("accuracy") = r.accuracy,
                            py::arg("top5_accuracy") = r.top5_accuracy, py::arg("images") = r.images,
                            py::arg("seconds") = r.seconds);
          },
          py::arg("data_dir"), py::kw_only(), py::arg("limit") = 0, py::arg("image_size") = 0, py::arg("workers") = 0,
          "Scores the weights on the dataset's test split (an image folder's val); returns a dict: split, loss, "
          "accuracy, top5_accuracy, images, seconds.")
      .def(
          "save_weights", [](const Network& n, const std::filesystem::path& p) { n.save_weights(p.string()); },
          py::arg("path"), "Writes every parameter and running statistic to a safetensors file.")
      .def(
          "load_weights",
          [](Network& n, const std::filesystem::path& p, bool skip_mismatched) {
            py::gil_scoped_release release;
            return n.load_weights(p.string(), {skip_mismatched});
          },
          py::arg("path"), py::kw_only(), py::arg("skip_mismatched") = false,
          "Reads a safetensors file: trident's (save_weights', a checkpoint) or a PyTorch state dict "
          "(safetensors.torch.save_file(model.state_dict(), path)); skip_mismatched: tensors whose shape differs "
          "(a new classifier) or that the network lacks are skipped and keep their values. Returns the skipped "
          "names, each with its shape and the network's.")
      .def(
          "export_onnx",
          [](const Network& n, const std::filesystem::path& p, bool fold_batchnorm) {
            py::gil_scoped_release release;
            n.export_onnx(p.string(), {fold_batchnorm});
          },
          py::arg("path"), py::kw_only(), py::arg("fold_batchnorm") = false,
          "Writes the model with its weights as ONNX (opset 17, NCHW input with a symbolic batch), as `trident "
          "export` does; fold_batchnorm folds each batch norm into the convolution before it.")
      .def(
          "export_state_dict",
          [](const Network& n, const std::filesystem::path& p) {
            py::gil_scoped_release release;
            n.export_state_dict(p.string());
          },
          py::arg("path"),
          "Writes the weights as a PyTorch state dict in safetensors: "
          "model.load_state_dict(safetensors.torch.load_file(path)) takes it.")
      .def("__repr__", [](const Network& n) {
        return "trident.Network(mode=" + std::string(kModes[static_cast<int>(n.mode())]) + ", backend=" + n.backend() +
               ", input_shape=" + shape_text(n.input_shape()) + ")";
      });
}

}  // namespace trident::python
