// The cross-backend harness behind OpCase: one graph on the backend under test and on cpu_ref,
// inputs drawn once for the tested graph's dtypes and copied (converted) into the reference,
// outputs poisoned with NaN so an element a kernel forgets to write fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "core/random.h"
#include "ir/op_registry.h"
#include "support/gpu_compare.h"
#include "support/op_case.h"
#include "support/tolerance.h"

namespace trident::test_support {
namespace {

std::vector<std::string> compared_outputs(const OpCase& c, const ir::Graph& g) {
  return c.outputs.empty() ? produced_names(g) : c.outputs;
}

// Small integers in [-3, 3] for every f32 input, parameter and state value.
void fill_small_ints(GraphRunner& r, const ir::Graph& g, uint64_t seed) {
  for (int v = 0; v < g.num_values(); ++v) {
    const ir::Value& val = g.value(v);
    if (val.role == ir::ValueRole::Activation || val.dtype != DType::f32) continue;
    Rng rng(seed * 0x9E3779B97F4A7C15ull ^ hash_name(val.name));
    TensorView t = r.view(v);
    for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = static_cast<float>(static_cast<int>(rng.next() % 7) - 3);
  }
}

// NaN (all bits set) in every host buffer a node writes; device runners poison their own.
void poison_outputs(GraphRunner& r, const ir::Graph& g) {
  if (r.context().on_device()) return;
  for (int nid : g.order())
    for (int v : g.node(nid).outputs) {
      if (g.value(v).dtype == DType::i32) continue;
      bool aliased = false;  // an in-place output shares its input's buffer: keep the input
      const ir::Node& n = g.node(nid);
      for (int in : n.inputs)
        if (r.view(in).data == r.view(v).data) aliased = true;
      if (aliased) continue;
      TensorView t = r.view(v);
      std::memset(t.data, 0xff, t.bytes());
    }
}

void expect_close_to_output_scale(const std::vector<double>& got, const std::vector<double>& ref, DType row,
                                  const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const Tolerance tol = tolerance(row);
  double largest = 0;
  for (double r : ref) largest = std::max(largest, std::abs(r));
  expect_each(
      got.size(), [&](size_t i) { return std::abs(got[i] - ref[i]) <= tol.atol + tol.rtol * largest; },  // NaN fails
      [&](size_t i) { return mismatch(what, i, got[i], ref[i]) + cat(" (largest ", largest, ")"); });
}

void expect_same_bits(GraphRunner& a, int va, GraphRunner& b, int vb, const std::string& what) {
  const TensorView x = a.view(va), y = b.view(vb);
  ASSERT_EQ(x.bytes(), y.bytes()) << what;
  const size_t width = dtype_size(x.dtype);
  const std::vector<double> xs = a.values(va), ys = b.values(vb);
  expect_each(
      static_cast<size_t>(x.numel()),
      [&](size_t i) {
        return std::memcmp(static_cast<const std::byte*>(x.data) + i * width,
                           static_cast<const std::byte*>(y.data) + i * width, width) == 0;
      },
      [&](size_t i) { return cat(what, "[", i, "]: ", xs[i], " but the reference gives ", ys[i]); });
}

}  // namespace

double non_negative(double v) { return std::max(v, 0.0); }
double positive(double v) { return std::abs(v) + 0.5; }

void map_values(GraphRunner& r, const ir::Graph& g, const std::vector<std::string>& names, double (*f)(double)) {
  for (const std::string& name : names) {
    const int v = g.find_value(name);
    if (v < 0) continue;
    TensorView t = r.view(v);
    const std::vector<double> x = r.values(v);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float y = static_cast<float>(f(x[static_cast<size_t>(i)]));
      if (t.dtype == DType::f32) t.as<float>()[i] = y;
      else if (t.dtype == DType::f16) t.as<uint16_t>()[i] = float_to_half(y);
      else if (t.dtype == DType::bf16) t.as<uint16_t>()[i] = float_to_bf16(y);
      else if (t.dtype == DType::f64) t.as<double>()[i] = f(x[static_cast<size_t>(i)]);
    }
  }
}

std::string op_case_skip_reason(const OpCase& c, const std::string& backend, DType dtype) {
  if (backend == "cuda") {
    const std::string why = gpu_missing_reason();
    if (!why.empty()) return "needs a GPU: " + why;
  }
  const ir::Graph g = c.build(dtype);
  for (int nid : g.order())
    if (!KernelRegistry::has(backend, g.node(nid).op)) return backend + " has no kernel for '" + g.node(nid).op + "'";
  return {};
}

void check_op_case(const OpCase& c, const std::string& backend, DType dtype) {
  const ir::Graph g = c.build(dtype);
  ir::Graph rg = c.build(c.reference == Reference::SameDtype ? dtype : DType::f32);
  std::map<std::string, int> reference_of;  // compared output → reference value, where names differ
  if (c.reference == Reference::Decomposition) {
    ASSERT_EQ(rg.order().size(), 1u) << c.name << ": a decomposition case holds one fused node";
    const ir::Node node = rg.node(rg.order()[0]);
    const ir::OpDef& def = ir::OpRegistry::get(node.op);
    ASSERT_TRUE(def.decompose) << node.op << " has no decomposition";
    rg.set_order({});
    const std::vector<int> dec = def.decompose(rg, node);
    ASSERT_EQ(dec.size(), node.outputs.size()) << node.op;
    for (size_t i = 0; i < dec.size(); ++i) reference_of[rg.value(node.outputs[i]).name] = dec[i];
  }
  GraphRunner tested(g, backend, c.misalign, !c.separate_outputs);
  tested.keep_kernels();
  if (auto o = c.options.find(backend); o != c.options.end()) tested.context().set_kernel_options(o->second);
  const bool tf32 = c.row == Row::Tf32 && backend == "cuda" && dtype == DType::f32;
  for (size_t draw = 0; draw < c.seeds.size(); ++draw) {
    const uint64_t seed = c.seeds[draw];
    SCOPED_TRACE("draw " + std::to_string(draw + 1) + " (seed " + std::to_string(seed) + ")" +
                 (draw ? ", the first draw's kernels on moved buffers" : ""));
    if (draw) tested.relocate();
    tested.randomize(seed);
    if (c.fill == Fill::SmallInts) fill_small_ints(tested, g, seed);
    if (c.prepare) c.prepare(tested, g);
    GraphRunner ref(rg, "cpu_ref", 0, !c.separate_outputs);
    copy_into_reference(tested, g, ref, rg);
    if (::testing::Test::HasFatalFailure()) return;
    poison_outputs(tested, g);
    tested.run();
    ref.run();
    for (const std::string& name : compared_outputs(c, g)) {
      const auto mapped = reference_of.find(name);
      const int a = g.find_value(name), b = mapped != reference_of.end() ? mapped->second : rg.find_value(name);
      ASSERT_GE(a, 0) << name;
      ASSERT_GE(b, 0) << name;
      const DType out = g.value(a).dtype;
      const DType row = out == DType::i32 ? DType::i32 : tf32 ? DType::f16 : dtype;
      const std::string what = backend + " " + name;
      switch (c.measure) {
        case Measure::PerElement: expect_close(tested.values(a), ref.values(b), row, what); break;
        case Measure::Scaled: expect_close_scaled(tested.values(a), ref.values(b), row, what); break;
        case Measure::OutputScale: expect_close_to_output_scale(tested.values(a), ref.values(b), row, what); break;
        case Measure::Rounded: expect_rounded_equal(tested.values(a), ref.values(b), out, what); break;
        case Measure::Bits: expect_same_bits(tested, a, ref, b, what); break;
      }
    }
  }
}

}  // namespace trident::test_support
