// The checks of arrays.h: each refusal is one sentence naming what was given
// and what the network takes, raised as trident.Error like the engine's own.
#include "arrays.h"

#include <limits>

#include "trident/error.h"

namespace py = pybind11;

namespace trident::python {

namespace {

std::vector<int64_t> shape_of(const py::array& a) { return {a.shape(), a.shape() + a.ndim()}; }

py::array numpy_array(py::handle obj, const char* what) {
  if (!py::isinstance<py::array>(obj))
    throw Error(std::string("the ") + what + " must be a NumPy array, not " +
                std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  return py::reinterpret_borrow<py::array>(obj);
}

}  // namespace

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

FloatArray calibration_array(py::handle images) {
  const py::array a = numpy_array(images, "calibration images");
  if (!a.dtype().is(py::dtype::of<float>()) || a.ndim() != 4)
    throw Error("the calibration images must be a float32 NCHW array [N,C,H,W], not " + std::string(py::str(a.dtype())) +
                " " + shape_text(shape_of(a)));
  return FloatArray::ensure(a);
}

FloatArray images_array(py::handle images, const std::vector<int64_t>& shape, const std::string& layout) {
  const py::array a = numpy_array(images, "images");
  if (!a.dtype().is(py::dtype::of<float>()))
    throw Error("the images must be float32, not " + std::string(py::str(a.dtype())) +
                "; convert them with .astype(numpy.float32)");
  if (shape_of(a) != shape)
    throw Error("the images are " + shape_text(shape_of(a)) + ", but the network takes " + shape_text(shape) + " (" +
                layout + ")");
  return FloatArray::ensure(a);
}

FloatArray any_images_array(py::handle images, const std::vector<int64_t>& shape, const std::string& layout) {
  const py::array a = numpy_array(images, "images");
  std::vector<int64_t> given = shape_of(a);
  if (a.dtype().is(py::dtype::of<float>()) && !given.empty() && given[0] >= 1 && given.size() == shape.size() &&
      std::equal(given.begin() + 1, given.end(), shape.begin() + 1))
    return FloatArray::ensure(a);
  std::vector<int64_t> any = shape;
  any[0] = given.empty() ? 1 : std::max<int64_t>(given[0], 1);
  return images_array(images, any, layout);  // the sentence naming what is wrong
}

std::vector<int32_t> labels_vector(py::handle labels, int64_t batch) {
  const py::array a = numpy_array(labels, "labels");
  const bool int32 = a.dtype().is(py::dtype::of<int32_t>()), int64 = a.dtype().is(py::dtype::of<int64_t>());
  if (!int32 && !int64)
    throw Error("the labels must be int32 or int64 class indices, not " + std::string(py::str(a.dtype())));
  if (shape_of(a) != std::vector<int64_t>{batch})
    throw Error("the labels are " + shape_text(shape_of(a)) + ", but a batch of " + std::to_string(batch) + " takes [" +
                std::to_string(batch) + "]");
  if (int32) {
    const auto c = py::array_t<int32_t, py::array::c_style>::ensure(a);
    return {c.data(), c.data() + c.size()};
  }
  const auto c = py::array_t<int64_t, py::array::c_style>::ensure(a);
  std::vector<int32_t> out(static_cast<size_t>(c.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t v = c.data()[i];
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      throw Error("label " + std::to_string(v) + " at position " + std::to_string(i) + " is not a class index");
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

}  // namespace trident::python
