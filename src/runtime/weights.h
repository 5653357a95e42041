// The runtime's names for weights outside an executable (core/host_tensor.h): executables,
// runners and checkpoints import and export them by name as runtime::WeightMap.
#pragma once
#include "core/host_tensor.h"

namespace trident::runtime {

using trident::HostTensor;
using trident::WeightMap;

}  // namespace trident::runtime
