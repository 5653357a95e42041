// trident._trident, the extension module behind the `trident` Python package:
// the C++ API of include/trident/ one for one, over libtrident.so.
// trident::Error becomes trident.Error, a RuntimeError whose message is the
// engine's one sentence.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.h"
#include "trident/trident.h"

namespace py = pybind11;

namespace trident::python {

void bind_model(py::module_& m) {
  py::class_<Model>(m, "Model",
                    "A network to compile: a zoo model by name or an ONNX file; its batch is chosen by Network.")
      .def_static(
          "zoo",
          [](const std::string& name, int64_t height, int64_t width, int64_t channels, int64_t classes) {
            return Model::zoo(name, {height, width, channels, classes});
          },
          py::arg("name"), py::kw_only(), py::arg("height") = 0, py::arg("width") = 0, py::arg("channels") = 0,
          py::arg("classes") = 0, "A zoo network by name; an extent of 0 keeps the model's default.")
      .def_static(
          "onnx", [](const std::filesystem::path& path) { return Model::onnx(path.string()); }, py::arg("path"),
          "A PyTorch-exported ONNX file, read when compiled; its initializers are the weights.")
      .def_static(
          "zoo_models",
          [] {
            py::list out;
            for (const ZooModel& z : Model::zoo_models())
              out.append(py::dict(py::arg("name") = z.name, py::arg("summary") = z.summary,
                                  py::arg("height") = z.height, py::arg("width") = z.width,
                                  py::arg("channels") = z.channels, py::arg("classes") = z.classes));
            return out;
          },
          "The zoo's networks as dicts: name, summary and default height, width, channels, classes.")
      .def_property_readonly("name", &Model::name, "The zoo name or the ONNX file's path.")
      .def("__repr__", [](const Model& model) { return "trident.Model('" + model.name() + "')"; });
}

}  // namespace trident::python

PYBIND11_MODULE(_trident, m) {
  m.doc() = "trident: compile and train convolutional networks with fused Conv+BN+ReLU";
  // pybind11 fetches NumPy's C API lazily, on the first array it makes; two threads making
  // their first calls with the GIL released would race there (and deadlock on pybind11 2.10).
  // Made here, under the import's GIL, once.
  py::module_::import("numpy");
  (void)py::array_t<float>(0);
  m.attr("__version__") = TRIDENT_VERSION;
  py::register_exception<trident::Error>(m, "Error", PyExc_RuntimeError);
  trident::python::bind_model(m);
  trident::python::bind_network(m);
  m.def(
      "set_cpu_threads",
      [](int max_threads, const std::string& policy) {
        if (policy != "adaptive" && policy != "fixed")
          throw trident::Error("set_cpu_threads: policy must be 'adaptive' or 'fixed', not '" + policy + "'");
        trident::set_cpu_threads(max_threads, policy == "adaptive");
      },
      py::arg("max_threads") = 0, py::kw_only(), py::arg("policy") = "adaptive",
      "How many CPU threads the CPU backends use, for the whole process: at most max_threads (0: every core); "
      "'adaptive' runs on the cores other processes leave free (as the trident command does), 'fixed' on all of them.");
}
