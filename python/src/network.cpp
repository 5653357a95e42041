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
constexpr const char* kPrecisions[] = {"fp32", "fp16", "bf16"};
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
  const FloatArray in = images_array(images, net.input_shape(layout), layout == Layout::nchw ? "NCHW" : "NHWC");
  FloatArray out(output_shape(net, layout));
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

py::dict train_result_dict(const TrainResult& r) {
  py::list epochs;
  for (const EpochResult& e : r.epochs)
    epochs.append(py::dict(py::arg("epoch") = e.epoch, py::arg("loss") = e.loss, py::arg("accuracy") = e.accuracy,
                           py::arg("seconds") = e.seconds));
  return py::dict(py::arg("epochs") = epochs, py::arg("test_loss") = r.test_loss,
                  py::arg("test_accuracy") = r.test_accuracy, py::arg("test_images") = r.test_images);
}

}  // namespace

void bind_network(py::module_& m) {
  py::class_<Network>(m, "Network", "A Model compiled for one mode, device, precision and batch.")
      .def(py::init([](const Model& model, const std::string& mode, const std::string& device,
                       const std::string& precision, int64_t batch, uint64_t seed, const std::string& optimizer,
                       std::optional<double> learning_rate, double momentum, std::optional<double> weight_decay,
                       bool nesterov, double beta1, double beta2, double eps, bool deterministic) {
             CompileOptions o;
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
             py::gil_scoped_release release;
             return Network(model, o);
           }),
           py::arg("model"), py::kw_only(), py::arg("mode") = "inference", py::arg("device") = "cpu",
           py::arg("precision") = "fp32", py::arg("batch") = 1, py::arg("seed") = 1, py::arg("optimizer") = "sgd",
           py::arg("learning_rate") = py::none(), py::arg("momentum") = 0.9, py::arg("weight_decay") = py::none(),
           py::arg("nesterov") = false, py::arg("beta1") = 0.9, py::arg("beta2") = 0.999, py::arg("eps") = 1e-8,
           py::arg("deterministic") = false,
           "Compiles `model`: mode inference or training; device cpu, cpu_ref, cuda or auto; precision fp32, fp16 or "
           "bf16 (cuda); batch 0 keeps an ONNX file's batch in inference; training: optimizer sgd (momentum, nesterov) or "
           "adamw (torch.optim.AdamW: beta1, beta2, eps), learning_rate and weight_decay for both (unset: 0.05 and "
           "5e-4 for sgd, 0.001 and 0.01 for adamw); deterministic: the same bits on every run "
           "(and on the CPU at every thread count), slower.")
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
          "Runs one batch of float32 images (NCHW unless layout='nhwc'); returns the first output.")
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
             int64_t train_limit, int64_t test_limit) {
            TrainResult r;
            {
              py::gil_scoped_release release;
              r = n.train(data_dir.string(), {epochs, warmup_epochs, train_limit, test_limit});
            }
            return train_result_dict(r);
          },
          py::arg("data_dir"), py::kw_only(), py::arg("epochs") = 1, py::arg("warmup_epochs") = 0.2,
          py::arg("train_limit") = 0, py::arg("test_limit") = 0,
          "Trains over a dataset folder as `trident train --data` reads it; returns a dict: 'epochs' (a list of dicts: "
          "epoch, loss, accuracy, seconds), 'test_loss', 'test_accuracy', 'test_images'.")
      .def(
          "save_weights", [](const Network& n, const std::filesystem::path& p) { n.save_weights(p.string()); },
          py::arg("path"), "Writes every parameter and running statistic to a safetensors file.")
      .def(
          "load_weights", [](Network& n, const std::filesystem::path& p) { n.load_weights(p.string()); },
          py::arg("path"), "Reads a safetensors file of trident's layouts (save_weights', or a checkpoint).")
      .def("__repr__", [](const Network& n) {
        return "trident.Network(mode=" + std::string(kModes[static_cast<int>(n.mode())]) + ", backend=" + n.backend() +
               ", input_shape=" + shape_text(n.input_shape()) + ")";
      });
}

}  // namespace trident::python
