// Test support: the message of the trident::Error that `f` throws, or "" when it throws none,
// so a test can compare a refusal's whole sentence.
#pragma once
#include <functional>
#include <string>

#include "core/error.h"

namespace trident::test_support {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace trident::test_support
