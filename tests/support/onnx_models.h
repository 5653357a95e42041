// Test support: where tests/onnx/make_models.py wrote the ONNX test models (a CTest fixture run
// with the project's .venv), and the skip for builds without ONNX or without those models.
#pragma once
#include <filesystem>

#include "frontend/onnx/onnx_import.h"

namespace trident::test_support {

inline const std::filesystem::path kOnnxModels = TRIDENT_ONNX_MODELS;

}  // namespace trident::test_support

#define REQUIRE_ONNX_MODELS()                                                                         \
  do {                                                                                                \
    if (!::trident::frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX";         \
    if (!std::filesystem::exists(::trident::test_support::kOnnxModels / "manifest.json"))             \
      GTEST_SKIP() << "no ONNX test models in " << ::trident::test_support::kOnnxModels               \
                   << ": the project .venv is missing (run scripts/setup.sh)";                        \
  } while (0)
