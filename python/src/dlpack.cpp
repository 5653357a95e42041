// Taking a DLPack capsule: the device is asked first (`__dlpack_device__`), so
// a host array is refused before anything is exported; the capsule is renamed
// "used_dltensor" once consumed, so its own destructor leaves the tensor to
// ours, as the protocol prescribes.
#include "dlpack.h"

#include "arrays.h"
#include "trident/error.h"

namespace py = pybind11;

namespace trident::python {

namespace {

std::string device_name(int32_t type) {
  switch (type) {
    case 1:
      return "the CPU";
    case 2:
      return "a CUDA device";
    case 3:
      return "pinned host memory (kDLCUDAHost)";
    case 13:
      return "CUDA managed memory (kDLCUDAManaged)";
    default:
      return "DLPack device type " + std::to_string(type);
  }
}

std::string dtype_name(const DLDataType& t) {
  static const char* const codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string s = t.code < 7 ? codes[t.code] : "code " + std::to_string(t.code) + " ";
  s += std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

}  // namespace

DeviceArray::DeviceArray(py::handle obj, const std::string& role, const std::vector<int64_t>& shape) {
  if (!py::hasattr(obj, "__dlpack__") || !py::hasattr(obj, "__dlpack_device__"))
    throw Error("infer_device takes " + role + " with __dlpack__ (a CUDA tensor of PyTorch, CuPy or JAX), not " +
                std::string(py::str(py::type::handle_of(obj).attr("__name__"))) + "; call infer for NumPy arrays");
  const auto device = obj.attr("__dlpack_device__")().cast<std::pair<int32_t, int32_t>>();
  if (device.first != kDLCUDA)
    throw Error("infer_device takes " + role + " on a CUDA device, but these are on " + device_name(device.first) +
                "; call infer for host arrays");
  // Stream 1 is CUDA's legacy default stream, which the producer orders its
  // pending work before.
  const py::object capsule = obj.attr("__dlpack__")(py::arg("stream") = 1);
  if (!PyCapsule_IsValid(capsule.ptr(), "dltensor"))
    throw Error("the " + role + "' __dlpack__ returned no unused 'dltensor' capsule");
  tensor_.reset(static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor")));
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");

  const DLTensor& t = tensor_->dl_tensor;
  if (t.device.device_type != kDLCUDA)
    throw Error("the " + role + "' capsule is on " + device_name(t.device.device_type) +
                ", although __dlpack_device__ said a CUDA device");
  if (t.dtype.code != 2 || t.dtype.bits != 32 || t.dtype.lanes != 1)
    throw Error("infer_device takes float32 " + role + ", not " + dtype_name(t.dtype));
  const std::vector<int64_t> got(t.shape, t.shape + t.ndim);
  if (got != shape)
    throw Error("the " + role + " are " + shape_text(got) + ", but the network's are " + shape_text(shape) +
                (role == "images" ? " (NHWC)" : ""));
  int64_t expected_stride = 1;
  for (int d = t.ndim - 1; d >= 0 && t.strides; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected_stride)
      throw Error("infer_device takes contiguous " + role + "; these have strides, so pass a contiguous copy");
    expected_stride *= t.shape[d];
  }
}

float* DeviceArray::data() const {
  return reinterpret_cast<float*>(static_cast<char*>(tensor_->dl_tensor.data) + tensor_->dl_tensor.byte_offset);
}

}  // namespace trident::python
