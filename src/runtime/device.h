// Choosing where a network runs: --device cpu|cpu_ref|cuda|auto becomes a backend name. `cpu`
// is the build's default CPU backend, a backend's own name picks it; `cuda` without a GPU (or
// in a build without the cuda backend) is an Error in one sentence; `auto` falls back to the
// default CPU backend and says so in `notice`.
#pragma once
#include <string>

namespace trident::runtime {

// Empty when the cuda backend is built and a GPU is usable; otherwise why not.
std::string gpu_unavailable_reason();

// The devices --device names besides the backends themselves.
inline constexpr const char* kDeviceChoices = "cpu, cpu_ref, cuda, auto";

// The backend for `device`: "cpu", "auto", or the name of a registered backend.
std::string backend_for_device(const std::string& device, std::string* notice);

}  // namespace trident::runtime
