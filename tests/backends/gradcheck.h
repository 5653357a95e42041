// Test helpers for the reference CPU kernels: owning host tensors, a one-call way to run a
// kernel through the KernelRegistry, and a central-difference gradient check in f64.
// Each check forms L = Σ G·forward(inputs) and compares ∂L/∂input to (L(x+h) − L(x−h)) / 2h.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "core/error.h"
#include "ir/graph.h"

namespace trident::testing {

// A dense host tensor owning its bytes; `view()` hands it to a kernel.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(Shape shape, DType dtype)
      : shape_(std::move(shape)), dtype_(dtype),
        bytes_(static_cast<size_t>(trident::numel(shape_)) * dtype_size(dtype), std::byte{0}) {}

  // A tensor holding `values` converted to `dtype` (f32, f64 or i32).
  static HostTensor of(Shape shape, std::vector<double> values, DType dtype = DType::f64) {
    HostTensor t(std::move(shape), dtype);
    EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel()) << "initializer size";
    for (int64_t i = 0; i < t.numel() && i < static_cast<int64_t>(values.size()); ++i)
      t.set(i, values[static_cast<size_t>(i)]);
    return t;
  }

  TensorView view() { return TensorView{bytes_.data(), shape_, dtype_}; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return trident::numel(shape_); }
  void* data() { return bytes_.data(); }

  double get(int64_t i) const {
    switch (dtype_) {
      case DType::f32: return load<float>(i);
      case DType::f64: return load<double>(i);
      case DType::i32: return load<int32_t>(i);
      default: ADD_FAILURE() << "test tensor dtype"; return 0;
    }
  }
  void set(int64_t i, double v) {
    switch (dtype_) {
      case DType::f32: store<float>(i, static_cast<float>(v)); break;
      case DType::f64: store<double>(i, v); break;
      case DType::i32: store<int32_t>(i, static_cast<int32_t>(v)); break;
      default: ADD_FAILURE() << "test tensor dtype";
    }
  }
  std::vector<double> values() const {
    std::vector<double> out(static_cast<size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = get(i);
    return out;
  }
  // The same values in another dtype.
  HostTensor as(DType dtype) const { return of(shape_, values(), dtype); }

 private:
  template <class T>
  T load(int64_t i) const {
    T v;
    std::memcpy(&v, bytes_.data() + i * sizeof(T), sizeof(T));
    return v;
  }
  template <class T>
  void store(int64_t i, T v) {
    std::memcpy(bytes_.data() + i * sizeof(T), &v, sizeof(T));
  }

  Shape shape_;
  DType dtype_ = DType::f64;
  std::vector<std::byte> bytes_;
};

// Uniform values in [lo, hi).
inline HostTensor random_tensor(Shape shape, std::mt19937& rng, double lo = -1.0, double hi = 1.0,
                                DType dtype = DType::f64) {
  HostTensor t(std::move(shape), dtype);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  return t;
}

// A node as a kernel sees it: op, name and attributes.
inline ir::Node make_node(std::string op, std::string name, ir::Attrs attrs = {}) {
  ir::Node node;
  node.op = std::move(op);
  node.name = std::move(name);
  node.attrs = std::move(attrs);
  return node;
}

// Runs the cpu_ref kernel of `op` on the given tensors (in the order of docs/OPS.md).
inline void run_op(const std::string& op, const ir::Attrs& attrs, std::vector<HostTensor*> in,
                   std::vector<HostTensor*> out) {
  const ir::Node node = make_node(op, "test_" + op, attrs);
  ir::Graph graph;
  KernelArgs args{node, {}, {}};
  for (HostTensor* t : in) args.in.push_back(t->view());
  for (HostTensor* t : out) args.out.push_back(t->view());
  KernelRegistry::make("cpu_ref", node, graph)->run(args);
}

// Σ G·y, the scalar whose gradient every check compares.
inline double weighted_sum(const HostTensor& g, const HostTensor& y) {
  EXPECT_EQ(g.numel(), y.numel());
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += g.get(i) * y.get(i);
  return s;
}

inline void expect_values(const HostTensor& t, const std::vector<double>& want, double tol,
                          const std::string& what = "") {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << what;
  for (int64_t i = 0; i < t.numel(); ++i)
    EXPECT_NEAR(t.get(i), want[static_cast<size_t>(i)], tol) << what << " element " << i;
}

// Two tensors agree element-wise within atol + rtol·|b|.
inline void expect_close(const HostTensor& a, const HostTensor& b, double atol, double rtol,
                         const std::string& what = "") {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  int failures = 0;
  for (int64_t i = 0; i < a.numel() && failures < 10; ++i) {
    const double d = std::abs(a.get(i) - b.get(i));
    if (d > atol + rtol * std::abs(b.get(i))) {
      ++failures;
      ADD_FAILURE() << what << " element " << i << ": " << a.get(i) << " vs " << b.get(i);
    }
  }
}

struct GradCheckOptions {
  double h = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-6;
  // Elements for which the check is skipped (e.g. relu inputs near its kink).
  std::function<bool(int64_t index, double value)> skip;
};

// Compares `analytic` (∂L/∂input from a backward kernel) with central differences of `loss`,
// which must recompute L from the current contents of `input`. Returns the elements checked.
inline int64_t expect_gradient(HostTensor& input, const HostTensor& analytic,
                               const std::function<double()>& loss, const std::string& what,
                               const GradCheckOptions& opt = {}) {
  EXPECT_EQ(input.dtype(), DType::f64) << what << ": gradient checks run in f64";
  EXPECT_EQ(input.shape(), analytic.shape()) << what;
  int64_t checked = 0;
  int failures = 0;
  for (int64_t i = 0; i < input.numel() && failures < 10; ++i) {
    const double x0 = input.get(i);
    if (opt.skip && opt.skip(i, x0)) continue;
    input.set(i, x0 + opt.h);
    const double up = loss();
    input.set(i, x0 - opt.h);
    const double down = loss();
    input.set(i, x0);
    const double numeric = (up - down) / (2 * opt.h);
    const double a = analytic.get(i);
    if (std::abs(numeric - a) > opt.atol + opt.rtol * std::abs(numeric)) {
      ++failures;
      ADD_FAILURE() << what << " element " << i << ": analytic " << a << ", numeric " << numeric;
    }
    ++checked;
  }
  return checked;
}

}  // namespace trident::testing
