// Reference softmax cross-entropy over [N,K] logits with i32 labels (label smoothing ε: the
// target (1 − ε)·onehot + ε/K), and its gradient.
// Each row is shifted by its max before exponentiating and summed in double; the batch mean
// is a serial sum over rows so the loss is bit-identical whatever the thread count.
#include <cmath>
#include <vector>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"

namespace trident::cpu_ref {

namespace {

struct LossDims {
  int64_t N, K;
};

LossDims loss_dims(const KernelArgs& a) {
  const TensorView &logits = a.in[0], &labels = a.in[1];
  expect_rank(a, logits, 2, "logits");
  expect_dtype(a, labels, DType::i32, "labels");
  const LossDims d{logits.shape[0], logits.shape[1]};
  if (labels.shape != Shape{d.N})
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): labels have shape " +
                shape_str(labels.shape) + " but [" + std::to_string(d.N) + "] was expected");
  const int32_t* L = labels.as<int32_t>();
  for (int64_t n = 0; n < d.N; ++n)
    if (L[n] < 0 || L[n] >= d.K)
      throw Error("node '" + a.node.name + "' (op " + a.node.op + "): label " +
                  std::to_string(L[n]) + " of sample " + std::to_string(n) +
                  " is outside the " + std::to_string(d.K) + " classes");
  return d;
}

// log Σ_k exp(row[k]), computed as max + log Σ exp(row − max).
template <class T>
double log_sum_exp(const T* row, int64_t K) {
  double mx = row[0];
  for (int64_t k = 1; k < K; ++k) mx = std::max(mx, static_cast<double>(row[k]));
  double s = 0.0;
  for (int64_t k = 0; k < K; ++k) s += std::exp(row[k] - mx);
  return mx + std::log(s);
}

void expect_scalar(const KernelArgs& a, const TensorView& v, const char* what) {
  if (v.numel() != 1)
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): " + what + " has shape " +
                shape_str(v.shape) + " but a single element was expected");
  expect_dtype(a, v, a.in[0].dtype, what);
}

template <class T>
void sce_forward(const KernelArgs& a) {
  const LossDims d = loss_dims(a);
  expect_scalar(a, a.out[0], "the loss");
  const T* X = a.in[0].as<T>();
  const int32_t* L = a.in[1].as<int32_t>();
  const double eps = a.node.attrs.f("label_smoothing", 0.0);
  std::vector<double> per_row(static_cast<size_t>(d.N));
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < d.N; ++n) {
    const T* row = X + n * d.K;
    double mean = 0;  // ε/K · Σ_k −log p_k = ε·(lse − mean_k x_k)
    if (eps > 0)
      for (int64_t k = 0; k < d.K; ++k) mean += static_cast<double>(row[k]);
    per_row[n] = log_sum_exp(row, d.K) - (1.0 - eps) * row[L[n]] - eps * mean / static_cast<double>(d.K);
  }
  double total = 0.0;
  for (double v : per_row) total += v;
  a.out[0].as<T>()[0] = static_cast<T>(d.N > 0 ? total / static_cast<double>(d.N) : 0.0);
}

template <class T>
void sce_backward(const KernelArgs& a) {
  const LossDims d = loss_dims(a);
  expect_scalar(a, a.in[2], "dloss");
  const TensorView& dlogits = a.out[0];
  expect_dtype(a, dlogits, a.in[0].dtype, "dlogits");
  if (dlogits.shape != a.in[0].shape)
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): dlogits must have the logits' shape");
  const T* X = a.in[0].as<T>();
  const int32_t* L = a.in[1].as<int32_t>();
  const double scale = static_cast<double>(a.in[2].as<T>()[0]) / static_cast<double>(d.N);
  const double eps = a.node.attrs.f("label_smoothing", 0.0), spread = eps / static_cast<double>(d.K);
  T* DX = dlogits.as<T>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < d.N; ++n) {
    const T* row = X + n * d.K;
    T* drow = DX + n * d.K;
    const double lse = log_sum_exp(row, d.K);
    for (int64_t k = 0; k < d.K; ++k) {
      const double p = std::exp(row[k] - lse) - (k == L[n] ? 1.0 - eps : 0.0) - spread;
      drow[k] = static_cast<T>(p * scale);
    }
  }
}

}  // namespace

void softmax_cross_entropy(const KernelArgs& args) {
  run_float(args, 2, [&](auto tag) { sce_forward<decltype(tag)>(args); });
}

void softmax_cross_entropy_backward(const KernelArgs& args) {
  run_float(args, 3, [&](auto tag) { sce_backward<decltype(tag)>(args); });
}

}  // namespace trident::cpu_ref
