// --device resolution (see device.h).
#include "runtime/device.h"

#include <algorithm>
#include <vector>

#include "backends/kernel.h"
#include "core/error.h"

#ifdef TRIDENT_HAVE_CUDA
#include "backends/cuda/cuda_context.h"
#endif

namespace trident::runtime {

std::string gpu_unavailable_reason() {
#ifdef TRIDENT_HAVE_CUDA
  std::string why;
  return cuda::gpu_available(&why) ? std::string() : why;
#else
  return "this build of trident has no cuda backend (it needs the CUDA toolkit, cuDNN and the "
         "cudnn-frontend headers when it is built: scripts/setup.sh)";
#endif
}

std::string backend_for_device(const std::string& device, std::string* notice) {
  const std::string cpu_backend = default_backend();
  if (device == "cpu") return cpu_backend;
  if (device != "cuda" && device != "auto") {
    const std::vector<std::string> backends = KernelRegistry::backends();
    if (std::find(backends.begin(), backends.end(), device) != backends.end()) return device;
    throw Error("--device '" + device + "' is not one of " + kDeviceChoices);
  }
  const std::string why = gpu_unavailable_reason();
  if (why.empty()) return "cuda";
  if (device == "cuda") throw Error("--device cuda: " + why);
  if (notice) *notice = "no GPU (" + why + "); running on the CPU backend '" + cpu_backend + "'";
  return cpu_backend;
}

}  // namespace trident::runtime
