// The one exception type of trident (declared with the public API, trident/error.h, so the
// library throws what its users catch) and the internal invariant check beside it.
#pragma once
#include <string>

#include "trident/error.h"

namespace trident {

// Internal invariant check: a failure is a bug in trident, reported as an Error.
#define TRIDENT_CHECK(cond, msg)                                                      \
  do {                                                                                \
    if (!(cond)) throw ::trident::Error(std::string("internal error: ") + (msg) +    \
                                        " (" #cond ", " __FILE__ ")");               \
  } while (0)

}  // namespace trident
