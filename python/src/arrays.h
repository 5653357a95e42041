// NumPy arrays across the module's boundary. Images must be float32 of exactly
// the shape the network takes, but for the number of images inference runs (a
// same-sized array in the other layout is a mistake, not a reshape); they pass without a copy when C-contiguous. Labels
// may be int32 or int64, the two NumPy gives by default.
#pragma once
#include <pybind11/numpy.h>

#include <cstdint>
#include <string>
#include <vector>

namespace trident::python {

using FloatArray = pybind11::array_t<float, pybind11::array::c_style>;

// "[2,1,28,28]", the engine's way of writing a shape.
std::string shape_text(const std::vector<int64_t>& shape);

// `images` as a C-contiguous float32 array of `shape` (in `layout`, "NCHW" or
// "NHWC"), or an Error.
FloatArray images_array(pybind11::handle images, const std::vector<int64_t>& shape, const std::string& layout);
// The same with any number of images: `shape` but for its first extent, at least 1.
FloatArray any_images_array(pybind11::handle images, const std::vector<int64_t>& shape, const std::string& layout);

// Calibration images for precision int8: a float32 [N,C,H,W] array (the network checks C, H, W).
FloatArray calibration_array(pybind11::handle images);

// `labels` as `batch` int32 class indices, or an Error; an int64 value outside
// int32 is refused, so it cannot wrap around into a valid class.
std::vector<int32_t> labels_vector(pybind11::handle labels, int64_t batch);

}  // namespace trident::python
