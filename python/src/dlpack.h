// DLPack, the array-exchange protocol of PyTorch, CuPy and JAX, read from its
// public C layout (dlpack.h, the unversioned DLManagedTensor that
// `__dlpack__()` returns by default) rather than through any of those
// libraries: Network.infer_device takes their CUDA arrays without a copy.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace trident::python {

// The spec's structs, field for field (dlpack.h v0.8; unchanged in the legacy
// capsule since).
struct DLDevice {
  int32_t device_type;  // DLDeviceType: kDLCPU 1, kDLCUDA 2, ...
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null means compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

inline constexpr int32_t kDLCUDA = 2;

// A float32 CUDA array taken from an object's `__dlpack__`, held (and its
// producer's memory kept alive) until this is destroyed, which calls the
// producer's deleter as the protocol asks.
class DeviceArray {
 public:
  // `role` names the argument in the sentence of an Error ("images", "output").
  DeviceArray(pybind11::handle obj, const std::string& role, const std::vector<int64_t>& shape);

  float* data() const;

 private:
  struct Release {
    void operator()(DLManagedTensor* t) const {
      if (t->deleter) t->deleter(t);
    }
  };
  std::unique_ptr<DLManagedTensor, Release> tensor_;  // released on a refusal in the constructor too
};

}  // namespace trident::python
