// The cuda backend's TRIDENT_VERBOSE lines (verbose.h), through core's switch and timeline.
#include "backends/cuda/verbose.h"

#include "core/verbose.h"

namespace trident::cuda {

bool verbose() { return trident::verbose(); }

void verbose_note(const std::string& line) { trident::verbose_note("cuda", line); }

}  // namespace trident::cuda
