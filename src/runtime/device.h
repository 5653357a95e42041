// Choosing where a network runs: --device cpu|cuda|auto becomes a backend name. `cuda`
// without a GPU (or in a build without the cuda backend) is an Error in one sentence; `auto`
// falls back to the CPU backend and says so in `notice`.
#pragma once
#include <string>

namespace trident::runtime {

// Empty when the cuda backend is built and a GPU is usable; otherwise why not.
std::string gpu_unavailable_reason();

// The backend for `device` ("cpu", "cuda" or "auto"); `cpu_backend` is used on the CPU.
std::string backend_for_device(const std::string& device, const std::string& cpu_backend, std::string* notice);

}  // namespace trident::runtime
