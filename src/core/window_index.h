// The window index a training max pooling keeps for its backward instead of its input: for
// each output element one byte, r·S + s of the winning cell (r, s) of its R×S window counted
// from the window's unclipped top-left corner (padding included), or kEmptyWindow for a window
// with no cell in the input. The bytes of a flat [N·P·Q·C] tensor sit four to a word of an i32
// tensor [ceil(N·P·Q·C / 4)] (little-endian: byte i of the buffer is element i). One byte is
// an eighth of an f32 input and, since P·Q ≤ H·W, a sixteenth or less of an f16 one.
#pragma once
#include <cstdint>

#include "core/shape.h"

namespace trident {

constexpr int64_t kEmptyWindow = 255;
constexpr int64_t kMostWindowCells = 255;  // R·S must stay below kEmptyWindow

inline Shape window_index_shape(int64_t pooled_elements) { return Shape{(pooled_elements + 3) / 4}; }

}  // namespace trident
