// Reference 2-D batch normalization over NHWC tensors (statistics per channel over N·H·W).
// Statistics are accumulated in double, two passes (mean, then squared deviations), with
// threads splitting the channel axis so every sum runs in a fixed order. batchnorm_affine
// (ops/bn_apply.cpp) gives the scale and shift a training batchnorm applies, from the same
// statistics and formula, so a deferred apply rounds exactly as the batchnorm does.
//
// Sync-BN (BackendOptions::batchnorm_world): the same two passes over the global batch. Each
// rank sums its rows in double; Σx is summed over the ranks (MPI_Allreduce) before the mean,
// then Σ(x − mean)² around that global mean before the variance, so the formula is the
// single-process one and only the association of the double sums differs (rank by rank instead
// of row by row). The backward sums Σdy and Σdy·x̂ over the ranks before dx; dgamma and dbeta
// stay the rank's own sums (the gradient all-reduce averages them). M is the global N·H·W.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"
#include "core/world.h"
#include "ops/norm_params.h"

namespace trident::cpu_ref {

namespace {

constexpr int64_t kChannelBlock = 16;

// out[c] = Σ_m f(m, c) over the M rows of a [M, C] view, in double, in row order.
template <class F>
void channel_sums(int64_t M, int64_t C, std::vector<double>& out, F&& f) {
  out.assign(static_cast<size_t>(C), 0.0);
  const int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t c = c0; c < c1; ++c) out[c] += f(m, c);
  }
}

struct BnShape {
  int64_t M = 0;  // N·H·W
  int64_t C = 0;
};

BnShape bn_shape(const KernelArgs& a, const TensorView& x) {
  expect_rank(a, x, 4, "x");
  return {x.shape[0] * x.shape[1] * x.shape[2], x.shape[3]};
}

void expect_channels(const KernelArgs& a, const TensorView& v, int64_t C, const char* what) {
  if (v.shape.size() != 1 || v.shape[0] != C)
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): " + what + " has shape " +
                shape_str(v.shape) + " but [" + std::to_string(C) + "] was expected");
  expect_dtype(a, v, a.in[0].dtype, what);
}

// y = x·scale[c] + shift[c], rows in parallel.
template <class T>
void affine_rows(const T* X, T* Y, int64_t M, int64_t C, const std::vector<T>& scale,
                 const std::vector<T>& shift) {
  const T* sc = scale.data();
  const T* sh = shift.data();
#pragma omp parallel for schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    const T* xr = X + m * C;
    T* yr = Y + m * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) yr[c] = xr[c] * sc[c] + sh[c];
  }
}

// The world a batchnorm's sums span (sync-BN), or null: each process's own rows.
using SyncWorld = distributed::World*;

// Per-channel sums over the ranks of `world`, in place (nothing without one).
void sum_over_ranks(SyncWorld world, std::vector<double>& sums) {
  if (world) world->sum(sums.data(), sums.size());
}

// N·H·W of the global batch: every rank holds M rows (the executables share one batch).
int64_t global_rows(SyncWorld world, int64_t M) { return world ? M * world->size() : M; }

// Batch mean and (biased) variance per channel of an [M, C] view, in double, two passes, over
// the global batch of `world`'s ranks where there is one. Returns the global row count.
template <class T>
int64_t batch_statistics(const KernelArgs& a, SyncWorld world, const T* X, int64_t M, int64_t C,
                         std::vector<double>& mean, std::vector<double>& var) {
  const int64_t rows = global_rows(world, M);
  if (rows < 2)
    throw Error("node '" + a.node.name + "' (" + a.node.op + "): training needs more than one value " +
                "per channel (N·H·W = " + std::to_string(rows) + ")");
  channel_sums(M, C, mean, [&](int64_t m, int64_t c) { return static_cast<double>(X[m * C + c]); });
  sum_over_ranks(world, mean);
  for (double& v : mean) v /= static_cast<double>(rows);
  channel_sums(M, C, var, [&](int64_t m, int64_t c) {
    const double d = X[m * C + c] - mean[c];
    return d * d;
  });
  sum_over_ranks(world, var);
  for (double& v : var) v /= static_cast<double>(rows);
  return rows;
}

// The scale and shift a training batchnorm applies to channel c (one formula for the
// batchnorm and batchnorm_affine, so the two agree bit for bit).
template <class T>
void training_affine(double mean, double invstd, T gamma, T beta, T& scale, T& shift) {
  scale = static_cast<T>(invstd * gamma);
  shift = static_cast<T>(beta - mean * invstd * gamma);
}

template <class T>
void bn_forward(const KernelArgs& a, SyncWorld world) {
  const TensorView& x = a.in[0];
  // Named variables, not a structured binding: clang 14 cannot capture bindings in lambdas.
  const BnShape bs = bn_shape(a, x);
  const int64_t M = bs.M, C = bs.C;
  const bool training = a.node.attrs.i("training", a.out.size() == 5 ? 1 : 0) != 0;
  expect_arity(a, 5, training ? 5 : 1);
  const char* names[] = {"x", "gamma", "beta", "running_mean", "running_var"};
  for (int i = 1; i < 5; ++i) expect_channels(a, a.in[i], C, names[i]);
  expect_dtype(a, a.out[0], x.dtype, "y");
  const double eps = ops::NormParams::of(a.node).eps;
  const T* X = x.as<T>();
  const T* gamma = a.in[1].as<T>();
  const T* beta = a.in[2].as<T>();
  std::vector<T> scale(C), shift(C);

  if (!training) {
    const T* rm = a.in[3].as<T>();
    const T* rv = a.in[4].as<T>();
    for (int64_t c = 0; c < C; ++c) {
      const double invstd = 1.0 / std::sqrt(static_cast<double>(rv[c]) + eps);
      scale[c] = static_cast<T>(invstd * gamma[c]);
      shift[c] = static_cast<T>(beta[c] - rm[c] * invstd * gamma[c]);
    }
    affine_rows(X, a.out[0].as<T>(), M, C, scale, shift);
    return;
  }

  for (int i = 1; i < 5; ++i) expect_channels(a, a.out[i], C, "an output statistic");
  std::vector<double> mean, var;
  const int64_t rows = batch_statistics(a, world, X, M, C, mean, var);

  const double momentum = ops::NormParams::of(a.node).momentum;
  const T* rm_in = a.in[3].as<T>();
  const T* rv_in = a.in[4].as<T>();
  T* saved_mean = a.out[1].as<T>();
  T* saved_invstd = a.out[2].as<T>();
  T* rm_out = a.out[3].as<T>();  // usually the same memory as rm_in
  T* rv_out = a.out[4].as<T>();
  const double unbias = static_cast<double>(rows) / static_cast<double>(rows - 1);
  for (int64_t c = 0; c < C; ++c) {
    const double invstd = 1.0 / std::sqrt(var[c] + eps);
    saved_mean[c] = static_cast<T>(mean[c]);
    saved_invstd[c] = static_cast<T>(invstd);
    training_affine(mean[c], invstd, gamma[c], beta[c], scale[c], shift[c]);
    rm_out[c] = static_cast<T>((1.0 - momentum) * rm_in[c] + momentum * mean[c]);
    rv_out[c] = static_cast<T>((1.0 - momentum) * rv_in[c] + momentum * var[c] * unbias);
  }
  affine_rows(X, a.out[0].as<T>(), M, C, scale, shift);
}

template <class T>
void bn_affine(const KernelArgs& a, SyncWorld world) {
  expect_arity(a, 3, 1);
  const TensorView& x = a.in[0];
  const BnShape bs = bn_shape(a, x);
  const int64_t M = bs.M, C = bs.C;
  expect_channels(a, a.in[1], C, "gamma");
  expect_channels(a, a.in[2], C, "beta");
  expect_dtype(a, a.out[0], DType::f32, "the affine");
  if (a.out[0].shape != Shape{2, C})
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): the affine must be [2," + std::to_string(C) + "]");
  std::vector<double> mean, var;
  batch_statistics(a, world, x.as<T>(), M, C, mean, var);
  const double eps = ops::NormParams::of(a.node).eps;
  const T *gamma = a.in[1].as<T>(), *beta = a.in[2].as<T>();
  float* out = a.out[0].as<float>();
  for (int64_t c = 0; c < C; ++c) {
    T scale, shift;
    training_affine(mean[c], 1.0 / std::sqrt(var[c] + eps), gamma[c], beta[c], scale, shift);
    out[c] = static_cast<float>(scale);
    out[C + c] = static_cast<float>(shift);
  }
}

template <class T>
void bn_backward(const KernelArgs& a, SyncWorld world) {
  expect_arity(a, 5, 3);
  const TensorView &x = a.in[0], &dy = a.in[1];
  // Named variables, not a structured binding: clang 14 cannot capture bindings in lambdas.
  const BnShape bs = bn_shape(a, x);
  const int64_t M = bs.M, C = bs.C;
  if (dy.shape != x.shape || a.out[0].shape != x.shape)
    throw Error("node '" + a.node.name + "' (op " + a.node.op + "): x, dy and dx must share a shape");
  expect_dtype(a, dy, x.dtype, "dy");
  expect_dtype(a, a.out[0], x.dtype, "dx");
  expect_channels(a, a.in[2], C, "gamma");
  expect_channels(a, a.in[3], C, "saved_mean");
  expect_channels(a, a.in[4], C, "saved_invstd");
  expect_channels(a, a.out[1], C, "dgamma");
  expect_channels(a, a.out[2], C, "dbeta");
  const T* X = x.as<T>();
  const T* DY = dy.as<T>();
  const T* gamma = a.in[2].as<T>();
  const T* mean = a.in[3].as<T>();
  const T* invstd = a.in[4].as<T>();

  std::vector<double> dbeta, dgamma;
  channel_sums(M, C, dbeta, [&](int64_t m, int64_t c) { return static_cast<double>(DY[m * C + c]); });
  channel_sums(M, C, dgamma, [&](int64_t m, int64_t c) {
    return static_cast<double>(DY[m * C + c]) * (X[m * C + c] - mean[c]) * invstd[c];
  });

  for (int64_t c = 0; c < C; ++c) {
    a.out[1].as<T>()[c] = static_cast<T>(dgamma[c]);
    a.out[2].as<T>()[c] = static_cast<T>(dbeta[c]);
  }
  // dx takes the sums of the global batch under sync-BN: [Σdy | Σdy·x̂] in one collective.
  const int64_t rows = global_rows(world, M);
  if (world) {
    std::vector<double> both(dbeta);
    both.insert(both.end(), dgamma.begin(), dgamma.end());
    sum_over_ranks(world, both);
    dbeta.assign(both.begin(), both.begin() + C);
    dgamma.assign(both.begin() + C, both.end());
  }

  // dx = gamma·invstd·(dy − dbeta/M − (x − mean)·invstd·dgamma/M), per-channel factors first.
  std::vector<T> g(C), db_m(C), xhat_k(C);
  for (int64_t c = 0; c < C; ++c) {
    g[c] = static_cast<T>(static_cast<double>(gamma[c]) * invstd[c]);
    db_m[c] = static_cast<T>(dbeta[c] / static_cast<double>(rows));
    xhat_k[c] = static_cast<T>(invstd[c] * dgamma[c] / static_cast<double>(rows));
  }
  T* DX = a.out[0].as<T>();
  const T *gp = g.data(), *dbp = db_m.data(), *kp = xhat_k.data();
#pragma omp parallel for schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    const T* xr = X + m * C;
    const T* dyr = DY + m * C;
    T* dxr = DX + m * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dxr[c] = gp[c] * (dyr[c] - dbp[c] - (xr[c] - mean[c]) * kp[c]);
  }
}

}  // namespace

std::unique_ptr<Kernel> make_batchnorm2d(const ir::Node&, const ir::Graph&, BackendContext& ctx) {
  const SyncWorld world = ctx.kernel_options().backend.batchnorm_world();
  return make_fn_kernel([world](const KernelArgs& args) {
    expect_arity(args, 5, 5, 1, 5);
    dispatch_float(args, args.in[0].dtype, [&](auto tag) { bn_forward<decltype(tag)>(args, world); });
  });
}

std::unique_ptr<Kernel> make_batchnorm_affine(const ir::Node&, const ir::Graph&, BackendContext& ctx) {
  const SyncWorld world = ctx.kernel_options().backend.batchnorm_world();
  return make_fn_kernel([world](const KernelArgs& args) {
    dispatch_float(args, args.in[0].dtype, [&](auto tag) { bn_affine<decltype(tag)>(args, world); });
  });
}

std::unique_ptr<Kernel> make_batchnorm2d_backward(const ir::Node&, const ir::Graph&, BackendContext& ctx) {
  const SyncWorld world = ctx.kernel_options().backend.batchnorm_world();
  return make_fn_kernel([world](const KernelArgs& args) {
    expect_arity(args, 5, 3);
    dispatch_float(args, args.in[0].dtype, [&](auto tag) { bn_backward<decltype(tag)>(args, world); });
  });
}

}  // namespace trident::cpu_ref
