// Test support: a fresh, empty directory under the system's temporary folder, named after the
// test and the process so parallel test runs never share one.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

namespace trident::test_support {

inline std::filesystem::path fresh_temp_dir(const std::string& name) {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("trident_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace trident::test_support
