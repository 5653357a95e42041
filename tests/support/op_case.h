// One cross-backend op test is one OpCase (ggml's test-backend-ops): a graph builder, the
// activation dtypes it runs in, the outputs and how they are held to cpu_ref (a measure and a row
// of the tolerance table), and how inputs are drawn. check_op_case() is the one harness: it runs
// the case on a backend and on cpu_ref from the same inputs and compares.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "backends/backend_context.h"
#include "core/dtype.h"
#include "ir/graph.h"
#include "support/graph_runner.h"

namespace trident::test_support {

// How an output is compared with cpu_ref's (support/tolerance.h, support/gpu_compare.h):
enum class Measure {
  PerElement,   // |a − b| ≤ atol + rtol·|b|                       (expect_close)
  Scaled,       // |a − b| ≤ atol·max(1, max|b|) + rtol·|b| (expect_close_scaled)
  OutputScale,  // |a − b| ≤ atol + rtol·max|b|: Winograd-like rounding bounded
                // by the norms
  Rounded,      // a == b rounded once to a's dtype (expect_rounded_equal)
  Bits,         // the same bytes (the reference graph holds the same dtypes)
};

// Which row of the tolerance table: the dtype's own, or Tf32: f32 convolutions and matmuls on cuda
// run on TF32 tensor cores (10 mantissa bits), so cuda's f32 is held to the f16 row.
enum class Row { OfDtype, Tf32 };

// Inputs: GraphRunner::randomize's uniform reals (positive for names holding "var", labels 0..2),
// or small integers in [-3, 3] (exact sums in f32: convolutions, matmuls, max-pool ties).
enum class Fill { Uniform, SmallInts };

// The reference graph: the case built in f32 (the dtype's inputs converted), in the same dtype
// (casts, compared bit for bit), or, for a case of one fused node, that node replaced by its
// registered decomposition (OpDef::decompose) in f32: output i against decomposition output i.
enum class Reference { F32, SameDtype, Decomposition };

struct OpCase {
  std::string name;                       // unique, letters, digits and '_'
  std::function<ir::Graph(DType)> build;  // the graph in one activation dtype
  std::vector<DType> dtypes{DType::f32};  // each is one test per backend that holds it
  std::vector<std::string> outputs;       // compared values; empty: every value a node writes
  Measure measure = Measure::Scaled;
  Row row = Row::OfDtype;
  Fill fill = Fill::Uniform;
  // After the draw, before the reference copies the inputs (positive variances, labels, ties).
  std::function<void(GraphRunner&, const ir::Graph&)> prepare;
  // One draw each; the second and later run the first draw's kernels on moved buffers.
  std::vector<uint64_t> seeds{1};
  Reference reference = Reference::F32;
  bool separate_outputs = false;      // outputs declared as aliases of inputs get their own buffers
  int64_t misalign = 0;               // device tensors this many elements off alignment
  std::vector<std::string> backends;  // empty: every backend; else only these (the entry says why)
  std::map<std::string, BackendContext::KernelOptions> options;  // per backend, before the build
};

// Every case, in table order (support/op_cases.cpp).
const std::vector<OpCase>& op_cases();
// The case named `name` (tests beside the table reuse its graphs: determinism, paths chosen).
const OpCase& op_case(const std::string& name);

// Why `c` cannot run on `backend` in `dtype` here (no GPU, an op without a kernel there), or "".
std::string op_case_skip_reason(const OpCase& c, const std::string& backend, DType dtype);

// Runs `c` in `dtype` on `backend` and on cpu_ref from the same inputs, draw by draw, and checks
// every compared output with the case's measure and row.
void check_op_case(const OpCase& c, const std::string& backend, DType dtype);

// The finite-difference mode (support/op_gradient_harness.cpp), on cpu_ref: why `c` is not
// checked there (more than one node, an op without a backward rule, no real first output), or "".
std::string op_case_gradient_skip_reason(const OpCase& c);
// `c` built in f64, its node's backward rule given a random gradient G of output 0, and each input
// gradient compared at sampled elements with central differences of L = Σ G·output0.
void check_op_case_gradient(const OpCase& c);

// Rewrites values in a runner: every element of the named values (those absent are ignored).
void map_values(GraphRunner& r, const ir::Graph& g, const std::vector<std::string>& names, double (*f)(double));
double non_negative(double v);  // a relu output: about half exact zeros
double positive(double v);      // |v| + 0.5: scales, inverse deviations, variances

}  // namespace trident::test_support
