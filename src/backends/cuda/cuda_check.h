// CUDA, cuDNN and cuBLAS status codes turned into trident::Error sentences. Kernels pass
// what they were doing ("cudaMalloc of 4096 bytes", "cuDNN conv_fprop plan for node conv1"),
// so the message says what failed and where; the executable adds the node and graph.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "core/error.h"

namespace trident::cuda {

inline void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw Error("CUDA error during " + what + ": " + cudaGetErrorString(e) + " (" +
                cudaGetErrorName(e) + ")");
}

inline void check(cudnnStatus_t s, const std::string& what) {
  if (s != CUDNN_STATUS_SUCCESS)
    throw Error("cuDNN error during " + what + ": " + cudnnGetErrorString(s));
}

inline void check(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error("cuBLAS error during " + what + ": status " + std::to_string(static_cast<int>(s)));
}

// After a kernel launch: a bad configuration is reported at once, naming the kernel.
inline void check_launch(const std::string& kernel) { check(cudaGetLastError(), "launch of " + kernel); }

}  // namespace trident::cuda
