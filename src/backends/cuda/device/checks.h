// Former home of the kernel construction checks, now backends/cuda/kernel_checks.h (host
// code does not belong among the device sources); kept until its last includers move.
#pragma once
#include "backends/cuda/kernel_checks.h"
