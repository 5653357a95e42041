// Placeholder: the cbr kernels of the cuda backend are not written yet.
#include "backends/cuda/kernels.h"
namespace trident::cuda {
void register_cbr_kernels() {}
}  // namespace trident::cuda
