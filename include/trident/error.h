// trident::Error, the one exception type of the engine and of its library API. Its message is
// one sentence meant for the user: it names the node, file, option or field at fault and, where
// possible, what to do. Every failure reaches a caller of the library as this type.
#pragma once
#include <stdexcept>
#include <string>

#include "trident/export.h"

namespace trident {

class TRIDENT_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace trident
