// layernorm and layernorm_backward (ops/layernorm.cpp) on the reference backend: one row of the
// last axis at a time, its mean and biased variance accumulated in double in index order, so
// the result does not depend on the thread count.
#include <cmath>
#include <vector>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"
#include "ops/norm_params.h"

namespace trident::cpu_ref {

namespace {

// A row's mean and inverse standard deviation 1/sqrt(var + eps), var biased.
template <class T>
std::pair<double, double> row_statistics(const T* x, int64_t c, double eps) {
  double sum = 0, sq = 0;
  for (int64_t k = 0; k < c; ++k) sum += static_cast<double>(x[k]);
  const double mean = sum / static_cast<double>(c);
  for (int64_t k = 0; k < c; ++k) {
    const double d = static_cast<double>(x[k]) - mean;
    sq += d * d;
  }
  return {mean, 1.0 / std::sqrt(sq / static_cast<double>(c) + eps)};
}

}  // namespace

void layernorm(const KernelArgs& args) {
  expect_arity(args, 3, 1);
  const double eps = ops::NormParams::of(args.node).eps;
  dispatch_float(args, args.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 1; i < 3; ++i) expect_dtype(args, args.in[i], args.in[0].dtype, i == 1 ? "gamma" : "beta");
    expect_dtype(args, args.out[0], args.in[0].dtype, "y");
    const T *x = args.in[0].as<T>(), *gamma = args.in[1].as<T>(), *beta = args.in[2].as<T>();
    T* y = args.out[0].as<T>();
    const int64_t c = args.in[0].shape.back(), rows = args.in[0].numel() / c;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * c;
      const auto [mean, invstd] = row_statistics(xr, c, eps);
      for (int64_t k = 0; k < c; ++k)
        y[r * c + k] = static_cast<T>((static_cast<double>(xr[k]) - mean) * invstd * static_cast<double>(gamma[k]) +
                                      static_cast<double>(beta[k]));
    }
  });
}

void layernorm_backward(const KernelArgs& args) {
  expect_arity(args, 3, 3);
  const double eps = ops::NormParams::of(args.node).eps;
  dispatch_float(args, args.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    expect_dtype(args, args.in[1], args.in[0].dtype, "dy");
    expect_dtype(args, args.in[2], args.in[0].dtype, "gamma");
    for (size_t i = 0; i < 3; ++i) expect_dtype(args, args.out[i], args.in[0].dtype, "gradient");
    const T *x = args.in[0].as<T>(), *dy = args.in[1].as<T>(), *gamma = args.in[2].as<T>();
    T *dx = args.out[0].as<T>(), *dgamma = args.out[1].as<T>(), *dbeta = args.out[2].as<T>();
    const int64_t c = args.in[0].shape.back(), rows = args.in[0].numel() / c;
    std::vector<double> xhat_rows(static_cast<size_t>(rows * c));
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T *xr = x + r * c, *dyr = dy + r * c;
      double* xhat = xhat_rows.data() + r * c;
      const auto [mean, invstd] = row_statistics(xr, c, eps);
      double mean_g = 0, mean_gx = 0;
      for (int64_t k = 0; k < c; ++k) {
        xhat[k] = (static_cast<double>(xr[k]) - mean) * invstd;
        const double gk = static_cast<double>(dyr[k]) * static_cast<double>(gamma[k]);
        mean_g += gk;
        mean_gx += gk * xhat[k];
      }
      mean_g /= static_cast<double>(c);
      mean_gx /= static_cast<double>(c);
      for (int64_t k = 0; k < c; ++k) {
        const double gk = static_cast<double>(dyr[k]) * static_cast<double>(gamma[k]);
        dx[r * c + k] = static_cast<T>(invstd * (gk - mean_g - xhat[k] * mean_gx));
      }
    }
    // The parameter gradients: sums over the rows, per channel, in row order.
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < c; ++k) {
      double sg = 0, sb = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const double d = static_cast<double>(dy[r * c + k]);
        sg += d * xhat_rows[static_cast<size_t>(r * c + k)];
        sb += d;
      }
      dgamma[k] = static_cast<T>(sg);
      dbeta[k] = static_cast<T>(sb);
    }
  });
}

}  // namespace trident::cpu_ref
