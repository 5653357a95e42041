// Reference kernels of mul (same shape, per channel [C] or per sample and channel [N,1,1,C])
// and its operand gradient mul_reduce, the activations (ops/activation_math.h), clip, concat,
// resize_channels and channel_shuffle (last axis).
// Flat loops over the contiguous NHWC layout; concat copies one channel slice per row.
#include <algorithm>
#include <cstring>
#include <limits>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"
#include "ops/activation.h"
#include "ops/mul_broadcast.h"

namespace trident::cpu_ref {

namespace {

template <class T>
void mul_t(const KernelArgs& a) {
  expect_dtype(a, a.in[1], a.in[0].dtype, "b");
  expect_dtype(a, a.out[0], a.in[0].dtype, "y");
  const TensorView &x = a.in[0], &b = a.in[1], &y = a.out[0];
  if (y.shape != x.shape || x.shape.empty())
    throw Error("node '" + a.node.name + "' (op mul): output shape " + shape_str(y.shape) +
                " differs from input " + shape_str(x.shape));
  const T* px = x.as<T>();
  const T* pb = b.as<T>();
  T* py = y.as<T>();
  const int64_t n = x.numel();
  const ops::MulBroadcast kind = ops::mul_broadcast(x.shape, b.shape);
  if (kind == ops::MulBroadcast::same) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) py[i] = px[i] * pb[i];
    return;
  }
  if (kind == ops::MulBroadcast::none)
    throw Error("node '" + a.node.name + "' (op mul): operand b has shape " + shape_str(b.shape));
  const int64_t c = x.shape.back();
  const int64_t rows = c > 0 ? n / c : 0;
  // sample_channel: row r belongs to sample r / rows_per_sample, whose C values b holds.
  const int64_t rows_per_sample = kind == ops::MulBroadcast::channel ? rows : x.shape[1] * x.shape[2];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* s = pb + (kind == ops::MulBroadcast::channel ? 0 : (r / rows_per_sample) * c);
#pragma omp simd
    for (int64_t k = 0; k < c; ++k) py[r * c + k] = px[r * c + k] * s[k];
  }
}

// db = Σ a·dy over the rows b was broadcast along (all rows for [C], a sample's H·W rows for
// [N, 1, 1, C]), accumulated in double in row order.
template <class T>
void mul_reduce_t(const KernelArgs& a) {
  const TensorView &x = a.in[0], &dy = a.in[1], &db = a.out[0];
  expect_dtype(a, dy, x.dtype, "dy");
  expect_dtype(a, db, x.dtype, "db");
  const ops::MulBroadcast kind = ops::mul_broadcast(x.shape, a.in[2].shape);
  if ((kind != ops::MulBroadcast::channel && kind != ops::MulBroadcast::sample_channel) || dy.shape != x.shape ||
      db.shape != a.in[2].shape)
    throw Error("node '" + a.node.name + "' (op mul_reduce): shapes " + shape_str(x.shape) + ", " +
                shape_str(dy.shape) + " and " + shape_str(db.shape) + " do not fit");
  const int64_t c = x.shape.back(), rows = c > 0 ? x.numel() / c : 0;
  const int64_t groups = kind == ops::MulBroadcast::channel ? 1 : x.shape[0], per = groups > 0 ? rows / groups : 0;
  const T *px = x.as<T>(), *pd = dy.as<T>();
  T* out = db.as<T>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t s = 0; s < groups; ++s)
    for (int64_t k = 0; k < c; ++k) {
      double acc = 0;
      for (int64_t r = s * per; r < (s + 1) * per; ++r) acc += static_cast<double>(px[r * c + k]) * pd[r * c + k];
      out[s * c + k] = static_cast<T>(acc);
    }
}

template <class T>
void clip_t(const KernelArgs& a, double lo_d, double hi_d) {
  expect_dtype(a, a.out[0], a.in[0].dtype, "y");
  if (a.out[0].numel() != a.in[0].numel())
    throw Error("node '" + a.node.name + "' (op clip): output and input sizes differ");
  const T lo = static_cast<T>(lo_d), hi = static_cast<T>(hi_d);
  const T* x = a.in[0].as<T>();
  T* y = a.out[0].as<T>();
  const int64_t n = a.in[0].numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i], lo), hi);
}

}  // namespace

void mul(const KernelArgs& args) { run_float(args, 2, [&](auto tag) { mul_t<decltype(tag)>(args); }); }

void mul_reduce(const KernelArgs& args) { run_float(args, 3, [&](auto tag) { mul_reduce_t<decltype(tag)>(args); }); }

void activation(const KernelArgs& args) {
  const ops::ActivationParams p = ops::activation_params(args.node.attrs);
  run_float(args, 1, [&](auto tag) {
    using T = decltype(tag);
    expect_dtype(args, args.out[0], args.in[0].dtype, "y");
    const T* x = args.in[0].as<T>();
    T* y = args.out[0].as<T>();
    const int64_t n = args.in[0].numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = ops::activation_forward(p, x[i]);
  });
}

void activation_backward(const KernelArgs& args) {
  const ops::ActivationParams p = ops::activation_params(args.node.attrs);
  run_float(args, 2, [&](auto tag) {
    using T = decltype(tag);
    expect_dtype(args, args.in[1], args.in[0].dtype, "dy");
    expect_dtype(args, args.out[0], args.in[0].dtype, "dx");
    const T *x = args.in[0].as<T>(), *dy = args.in[1].as<T>();
    T* dx = args.out[0].as<T>();
    const int64_t n = args.in[0].numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) dx[i] = ops::activation_backward(p, x[i], dy[i]);
  });
}

void clip(const KernelArgs& args) {
  expect_arity(args, 1, 1);
  const double lo = args.node.attrs.f("min", -std::numeric_limits<double>::infinity());
  const double hi = args.node.attrs.f("max", std::numeric_limits<double>::infinity());
  dispatch_float(args, args.in[0].dtype, [&](auto tag) { clip_t<decltype(tag)>(args, lo, hi); });
}

void concat(const KernelArgs& args) {
  if (args.in.empty() || args.out.size() != 1)
    throw Error("node '" + args.node.name + "' (op concat) needs inputs and one output");
  const TensorView& y = args.out[0];
  if (y.shape.empty()) throw Error("node '" + args.node.name + "' (op concat): scalar output");
  const size_t es = dtype_size(y.dtype);
  const int64_t cy = y.shape.back();
  const int64_t rows = cy > 0 ? y.numel() / cy : 0;
  int64_t offset = 0;
  for (const TensorView& x : args.in) {
    expect_dtype(args, x, y.dtype, "every input");
    if (x.shape.size() != y.shape.size() || x.numel() != rows * x.shape.back())
      throw Error("node '" + args.node.name + "' (op concat): input " + shape_str(x.shape) +
                  " does not fit output " + shape_str(y.shape));
    const int64_t cx = x.shape.back();
    if (offset + cx > cy)
      throw Error("node '" + args.node.name + "' (op concat): inputs exceed the output channels");
    const auto* src = static_cast<const std::byte*>(x.data);
    auto* dst = static_cast<std::byte*>(y.data);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + (r * cy + offset) * es, src + r * cx * es, cx * es);
    offset += cx;
  }
  if (offset != cy)
    throw Error("node '" + args.node.name + "' (op concat): inputs do not fill the output");
}

void channel_shuffle(const KernelArgs& args) {
  expect_arity(args, 1, 1);
  const TensorView &x = args.in[0], &y = args.out[0];
  expect_dtype(args, x, y.dtype, "the input");
  const int64_t c = x.shape.empty() ? 0 : x.shape.back(), groups = args.node.attrs.i("groups", 0);
  if (y.shape != x.shape || groups < 1 || c % groups != 0)
    throw Error("node '" + args.node.name + "' (op channel_shuffle): " + std::to_string(groups) +
                " groups do not divide " + shape_str(x.shape) + "'s channels into an output " + shape_str(y.shape));
  const size_t es = dtype_size(y.dtype);
  const int64_t per = c / groups, rows = c > 0 ? x.numel() / c : 0;
  const auto* src = static_cast<const std::byte*>(x.data);
  auto* dst = static_cast<std::byte*>(y.data);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < groups; ++i)
      for (int64_t j = 0; j < per; ++j)
        std::memcpy(dst + (r * c + j * groups + i) * es, src + (r * c + i * per + j) * es, es);
}

void resize_channels(const KernelArgs& args) {
  expect_arity(args, 1, 1);
  const TensorView &x = args.in[0], &y = args.out[0];
  expect_dtype(args, x, y.dtype, "the input");
  if (x.shape.empty() || x.shape.size() != y.shape.size() ||
      x.numel() / std::max<int64_t>(x.shape.back(), 1) != y.numel() / std::max<int64_t>(y.shape.back(), 1))
    throw Error("node '" + args.node.name + "' (op resize_channels): input " + shape_str(x.shape) +
                " and output " + shape_str(y.shape) + " differ in more than the last axis");
  const size_t es = dtype_size(y.dtype);
  const int64_t cx = x.shape.back(), cy = y.shape.back();
  const int64_t rows = cy > 0 ? y.numel() / cy : 0;
  const int64_t kept = std::min(cx, cy);
  const auto* src = static_cast<const std::byte*>(x.data);
  auto* dst = static_cast<std::byte*>(y.data);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * cy * es, src + r * cx * es, kept * es);
    std::memset(dst + (r * cy + kept) * es, 0, (cy - kept) * es);  // all-zero bits: +0 in every float type
  }
}

}  // namespace trident::cpu_ref
