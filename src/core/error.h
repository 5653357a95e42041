// The one exception type of trident. Its message is a sentence meant for the user:
// it names the node, file, flag or field at fault and, where possible, what to do.
#pragma once
#include <stdexcept>
#include <string>

namespace trident {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Internal invariant check: a failure is a bug in trident, reported as an Error.
#define TRIDENT_CHECK(cond, msg)                                                      \
  do {                                                                                \
    if (!(cond)) throw ::trident::Error(std::string("internal error: ") + (msg) +    \
                                        " (" #cond ", " __FILE__ ")");               \
  } while (0)

}  // namespace trident
