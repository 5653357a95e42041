// Bounded smoke run of fuzz/fuzz_onnx.cpp in the regular suite: 4000 seeded mutations of the
// ONNX seed models (fuzz/corpus/onnx plus models built here byte by byte) are imported at
// batch 1 and, where that succeeds, compiled as `trident explain` does (cpu_ref, inference,
// fused and unfused) with a memory plan that must hold every value. Nothing is allocated or
// run; every failure must be a trident::Error.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "core/error.h"
#include "frontend/onnx/onnx_import.h"
#include "runtime/fusion_report.h"
#include "support/mutate.h"
#include "support/onnx_bytes.h"
#include "support/plan_fits.h"

using namespace trident;

namespace {

std::vector<std::string> seeds() {
  std::vector<std::string> v = {test_support::conv_model_bytes(1, 4, 3, 1), test_support::conv_model_bytes(0, 2, 1, 0)};
  // The tests run from the source tree, where the fuzz seeds are checked in.
  for (const auto& e : std::filesystem::directory_iterator("fuzz/corpus/onnx")) {
    std::ifstream f(e.path(), std::ios::binary);
    v.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  std::sort(v.begin(), v.end());  // directory order is not deterministic
  return v;
}

// Imports and compiles `bytes`; false when an Error refused it. A plan that does not hold a
// value fails the test.
bool import_and_compile(const std::string& bytes, const std::string& label) {
  frontend::OnnxImport m;
  try {
    m = frontend::import_onnx_from_memory(bytes.data(), bytes.size(), {/*batch=*/1}, label);
  } catch (const Error&) {
    return false;
  }
  passes::CompileOptions opt;
  opt.mode = passes::Mode::Infer;
  opt.backend = "cpu_ref";
  try {
    const runtime::FusionReport r = runtime::explain(label, m.graph, opt);
    EXPECT_EQ(test_support::plan_misfit(r.fused.graph, r.fused.plan), "") << label;
    EXPECT_EQ(test_support::plan_misfit(r.unfused.graph, r.unfused.plan), "") << label;
  } catch (const Error&) {
    return false;
  }
  return true;
}

}  // namespace

TEST(OnnxImportCompileFuzzSmoke, MutatedModelsCompileOrAreRefused) {
  if (!frontend::onnx_import_available()) GTEST_SKIP() << "built without ONNX support";
  const auto base = seeds();
  // Every seed but the one made to be refused (flatten_then_relu.onnx) compiles.
  int good_seeds = 0;
  for (size_t i = 0; i < base.size(); ++i) good_seeds += import_and_compile(base[i], "seed " + std::to_string(i));
  ASSERT_EQ(good_seeds, static_cast<int>(base.size()) - 1);
  std::mt19937_64 rng(20261201);
  int compiled = 0, refused = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string b = base[i % base.size()];
    test_support::mutate(b, rng);
    (import_and_compile(b, "mutation " + std::to_string(i)) ? compiled : refused)++;
  }
  EXPECT_GT(refused, 1000);
  EXPECT_GT(compiled, 100);
  std::cout << "[ onnx ] import+compile smoke: " << compiled << " compiled, " << refused << " refused\n";
}
