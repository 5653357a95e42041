// Test support for the cuda backend: skip with a reason where there is no GPU (CI), and run
// one graph on "cuda" and on "cpu_ref" with the same inputs, comparing every output.
// The GPU graph may hold f16/bf16 activations where the reference graph holds f32: inputs
// are drawn once (for the GPU graph's dtypes) and converted for the reference, so both
// compute on identical numbers. Outputs are compared within the tolerance table, or exactly
// (the reference rounded once to the GPU's dtype) for element-wise ops; GPU tensors can be
// placed off 16-byte alignment to reach the kernels' scalar paths.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "core/half.h"
#include "support/graph_runner.h"
#include "support/tolerance.h"

#ifdef TRIDENT_HAVE_CUDA
#include "backends/cuda/cuda_context.h"
#endif

namespace trident::test_support {

// Empty when a GPU is usable; otherwise why not.
inline std::string gpu_missing_reason() {
#ifdef TRIDENT_HAVE_CUDA
  std::string why;
  return cuda::gpu_available(&why) ? std::string() : why;
#else
  return "this build has no cuda backend (configure with CUDA, cuDNN and cudnn-frontend)";
#endif
}

#define TRIDENT_REQUIRE_GPU()                                                          \
  do {                                                                                 \
    const std::string trident_gpu_why = ::trident::test_support::gpu_missing_reason(); \
    if (!trident_gpu_why.empty()) GTEST_SKIP() << "needs a GPU: " << trident_gpu_why;  \
  } while (0)

// |got − ref| ≤ atol·max(1, max|ref|) + rtol·|ref| with the row of `row`: the absolute part
// scales with the tensor, since reduced-precision error grows with the magnitudes summed.
inline void expect_close_scaled(const std::vector<double>& got, const std::vector<double>& ref, DType row,
                                const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const Tolerance tol = tolerance(row);
  double scale = 1;
  for (double r : ref) scale = std::max(scale, std::abs(r));
  expect_each(
      got.size(),
      [&](size_t i) {
        return std::abs(got[i] - ref[i]) <= tol.atol * scale + tol.rtol * std::abs(ref[i]) && std::isfinite(got[i]);
      },
      [&](size_t i) { return mismatch(what, i, got[i], ref[i]) + cat(" (scale ", scale, ")"); });
}

// ‖got − ref‖₂ / ‖ref‖₂ ≤ the row's rtol: for whole training steps, where reduced precision
// moves individual gradient elements by more than the element-wise row while the tensor as a
// whole stays within it (the measure of METHOD-style checks: norm of the error over the norm).
inline void expect_close_norm(const std::vector<double>& got, const std::vector<double>& ref, double tol,
                              const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double err = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << "[" << i << "] is " << got[i];
    err += (got[i] - ref[i]) * (got[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  const double rel = std::sqrt(err) / std::max(std::sqrt(norm), 1e-30);
  EXPECT_LE(rel, tol) << what << ": relative L2 error " << rel;
}
inline void expect_close_norm(const std::vector<double>& got, const std::vector<double>& ref, DType row,
                              const std::string& what) {
  expect_close_norm(got, ref, tolerance(row).rtol, what);
}

// Each GPU value equals its reference value rounded once to the GPU value's dtype: what an
// element-wise op computed as one f32 operation (or a chain of them) and stored gives.
inline void expect_rounded_equal(const std::vector<double>& got, const std::vector<double>& ref, DType t,
                                 const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  auto want = [&](size_t i) {
    const float r = static_cast<float>(ref[i]);
    return t == DType::f16 ? half_to_float(float_to_half(r)) : t == DType::bf16 ? bf16_to_float(float_to_bf16(r)) : r;
  };
  expect_each(
      got.size(), [&](size_t i) { return got[i] == want(i) || (std::isnan(got[i]) && std::isnan(want(i))); },
      [&](size_t i) {
        return cat(what, "[", i, "]: ", got[i], " but the reference rounded to ", dtype_name(t), " is ", want(i));
      });
}

// Copies every non-activation value of `from` (graph g) into `to` (graph rg, the same names):
// bytes where the dtypes agree, else converted to the reference's f32, f64 or i32.
inline void copy_into_reference(GraphRunner& from, const ir::Graph& g, GraphRunner& to, const ir::Graph& rg) {
  for (int v = 0; v < g.num_values(); ++v) {
    const ir::Value& val = g.value(v);
    if (val.role == ir::ValueRole::Activation) continue;
    const int r = rg.find_value(val.name);
    ASSERT_GE(r, 0) << "reference graph lacks " << val.name;
    TensorView t = to.view(r);
    if (t.dtype == val.dtype) {
      to.copy_from(from, r, v);
      continue;
    }
    const std::vector<double> x = from.values(v);
    ASSERT_EQ(static_cast<size_t>(t.numel()), x.size()) << val.name;
    for (size_t i = 0; i < x.size(); ++i) {
      if (t.dtype == DType::f32) t.as<float>()[i] = static_cast<float>(x[i]);
      else if (t.dtype == DType::f64) t.as<double>()[i] = x[i];
      else if (t.dtype == DType::i32) t.as<int32_t>()[i] = static_cast<int32_t>(x[i]);
      else FAIL() << "reference values must be f32, f64 or i32: " << val.name;
    }
  }
}

// What a comparison checks for one value: the GPU's numbers, the reference's, the value's name.
using ValueCheck = std::function<void(const std::vector<double>&, const std::vector<double>&, const std::string&)>;

// Runs `gpu` on cuda and `ref` (same value names, f32 where `gpu` has f16/bf16) on cpu_ref.
// Every non-activation value is drawn from `seed` for the GPU graph and copied, converted,
// into the reference. Then every value named in `compare` is checked with `check`. `misalign`
// places the GPU tensors that many elements past aligned memory (GraphRunner).
inline void run_against_cpu_ref(const ir::Graph& gpu, const ir::Graph& ref, const std::vector<std::string>& compare,
                                uint64_t seed, const std::function<void(GraphRunner&)>& adjust_inputs, int64_t misalign,
                                const ValueCheck& check) {
  GraphRunner on_gpu(gpu, "cuda", misalign), on_ref(ref, "cpu_ref");
  on_gpu.randomize(seed);
  if (adjust_inputs) adjust_inputs(on_gpu);
  copy_into_reference(on_gpu, gpu, on_ref, ref);
  if (::testing::Test::HasFatalFailure()) return;
  on_gpu.run();
  on_ref.run();
  for (const std::string& name : compare) {
    const int a = gpu.find_value(name), b = ref.find_value(name);
    ASSERT_GE(a, 0) << name;
    ASSERT_GE(b, 0) << name;
    check(on_gpu.values(a), on_ref.values(b), name);
  }
}

// run_against_cpu_ref, every value checked with expect_close_scaled on the row of `row`.
inline void compare_with_cpu_ref(const ir::Graph& gpu, const ir::Graph& ref, const std::vector<std::string>& compare,
                                 DType row, uint64_t seed,
                                 const std::function<void(GraphRunner&)>& adjust_inputs = nullptr,
                                 int64_t misalign = 0) {
  run_against_cpu_ref(gpu, ref, compare, seed, adjust_inputs, misalign,
                      [&](const std::vector<double>& got, const std::vector<double>& want, const std::string& name) {
                        expect_close_scaled(got, want, row, name);
                      });
}

// A graph builder for one activation dtype (the GPU graph in f32/f16/bf16, the reference in f32).
using GraphBuild = std::function<ir::Graph(DType)>;

// Compares the GPU graph in `dtype` with the f32 reference, on the tolerance row of `dtype`.
inline void check_against_reference(const GraphBuild& build, DType dtype, const std::vector<std::string>& outputs,
                                    uint64_t seed, const std::function<void(GraphRunner&)>& adjust = nullptr,
                                    int64_t misalign = 0) {
  compare_with_cpu_ref(build(dtype), build(DType::f32), outputs, dtype, seed, adjust, misalign);
}

// The GPU graph in `dtype` against the f32 reference with no tolerance: every output must be
// the reference's rounded to `dtype` (element-wise ops and casts, one rounding per output).
inline void check_rounded_reference(const GraphBuild& build, DType dtype, const std::vector<std::string>& outputs,
                                    uint64_t seed, int64_t misalign = 0) {
  run_against_cpu_ref(build(dtype), build(DType::f32), outputs, seed, nullptr, misalign,
                      [&](const std::vector<double>& got, const std::vector<double>& want, const std::string& name) {
                        expect_rounded_equal(got, want, dtype, name);
                      });
}

// Names of every value the nodes of `g` write.
inline std::vector<std::string> produced_names(const ir::Graph& g) {
  std::vector<std::string> names;
  for (int nid : g.order())
    for (int v : g.node(nid).outputs) names.push_back(g.value(v).name);
  return names;
}

// Value `name` after one run of `g` on cuda from random inputs drawn from `seed`.
inline std::vector<double> run_once_on_gpu(const ir::Graph& g, const std::string& name, uint64_t seed) {
  GraphRunner r(g, "cuda");
  r.randomize(seed);
  r.run();
  return r.values(g.find_value(name));
}

}  // namespace trident::test_support
