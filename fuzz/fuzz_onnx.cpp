// libFuzzer entry for the ONNX reader and what `trident explain model.onnx` does next: any byte
// string must import or throw trident::Error, and an imported graph (batch 1) must compile for
// cpu_ref with and without fusion and get a memory plan that holds every value, or throw
// trident::Error. No buffers are allocated and no kernel runs. See README.md for the run.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "frontend/onnx/onnx_import.h"
#include "runtime/fusion_report.h"
#include "support/plan_fits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trident;
  frontend::OnnxImport model;
  try {
    model = frontend::import_onnx_from_memory(data, size, {/*batch=*/1}, "fuzz input");
  } catch (const Error&) {
    return 0;
  }
  passes::CompileOptions options;
  options.mode = passes::Mode::Infer;
  options.backend = "cpu_ref";
  try {
    const runtime::FusionReport r = runtime::explain("fuzz input", model.graph, options);
    if (!test_support::plan_misfit(r.fused.graph, r.fused.plan).empty() ||
        !test_support::plan_misfit(r.unfused.graph, r.unfused.plan).empty())
      std::abort();
  } catch (const Error&) {
    // Refusing an imported graph with one sentence is allowed; crashing is not.
  }
  return 0;
}
