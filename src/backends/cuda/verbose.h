// TRIDENT_VERBOSE for the cuda backend: where it is set, kernels and the context say on stderr
// which path they took (fused graph or fallback, recorded step or not) and what tuning chose.
// Its own file, below the context, so every layer of the backend can report without
// including the layers above it.
#pragma once
#include <string>

namespace trident::cuda {

// Whether TRIDENT_VERBOSE is set (and not "0"); read once.
bool verbose();
// One line on stderr, prefixed "trident cuda: "; lines from concurrent builds do not interleave.
void verbose_note(const std::string& line);

}  // namespace trident::cuda
