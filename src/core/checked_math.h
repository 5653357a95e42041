// Checked arithmetic for extents, element counts and byte counts that come from files and
// flags. One limit on elements per tensor, applied while the product accumulates, means a
// crafted shape is refused with a sentence before any count can wrap and size a buffer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/shape.h"

namespace trident {

// The most elements one tensor may have: 2^40 (4 TiB of f32), far above any real model and
// far below the point where counts times a dtype size or offsets could overflow 64 bits.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

// a * b for non-negative a, b; throws naming `what` when the product overflows int64.
inline int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) throw Error(what + " is too large: a size computed from it overflows 64 bits");
  return out;
}

// a + b for byte counts and offsets; throws naming `what` on overflow.
inline size_t checked_add(size_t a, size_t b, const std::string& what) {
  size_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) throw Error(what + " is too large: a size computed from it overflows 64 bits");
  return out;
}

// a + b for extents; throws naming `what` on overflow.
inline int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) throw Error(what + " is too large: a size computed from it overflows 64 bits");
  return out;
}

// The element count of `s`; refuses a negative extent and a count above kMaxTensorElements
// (checked after every factor, so nothing wraps). `what` names the tensor, e.g. "value 'conv1'".
inline int64_t checked_numel(const Shape& s, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw Error(what + " has a negative extent in shape " + shape_str(s));
    if (d != 0 && n > kMaxTensorElements / d)
      throw Error(what + " has shape " + shape_str(s) + ", more than the 2^40 elements trident allows in one tensor");
    n *= d;
  }
  return n;
}

// The byte size of `elements` elements of `elem_bytes` each (elements already checked).
inline size_t checked_bytes(int64_t elements, size_t elem_bytes, const std::string& what) {
  return static_cast<size_t>(checked_mul(elements, static_cast<int64_t>(elem_bytes), what));
}

}  // namespace trident
