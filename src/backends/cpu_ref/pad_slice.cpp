// Reference kernels of pad2d and channel_slice: values moved as bytes (any floating dtype),
// cells outside the input written with pad2d's 'value' (ops/pad_fill.h) or channel_slice's
// zero bits. Flat loops over the contiguous NHWC layout, one memcpy per contiguous run.
#include <algorithm>
#include <cstring>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"
#include "ops/pad_fill.h"

namespace trident::cpu_ref {

namespace {

// `count` values of `es` bytes at `dst`, each the low `es` bytes of `bits`.
void fill_values(std::byte* dst, int64_t count, uint64_t bits, size_t es) {
  if (bits == 0) {
    std::memset(dst, 0, static_cast<size_t>(count) * es);
    return;
  }
  for (int64_t i = 0; i < count; ++i) std::memcpy(dst + i * es, &bits, es);
}

}  // namespace

void pad2d(const KernelArgs& args) {
  expect_arity(args, 1, 1);
  const TensorView &x = args.in[0], &y = args.out[0];
  expect_dtype(args, y, x.dtype, "the output");
  const std::vector<int64_t>& p = args.node.attrs.ints("pads");
  if (x.shape.size() != 4 || y.shape.size() != 4 || p.size() != 4 || y.shape[0] != x.shape[0] ||
      y.shape[3] != x.shape[3] || y.shape[1] != x.shape[1] + p[0] + p[2] || y.shape[2] != x.shape[2] + p[1] + p[3])
    throw Error("node '" + args.node.name + "' (op pad2d): output " + shape_str(y.shape) + " is not input " +
                shape_str(x.shape) + " padded by " + shape_str(p));
  const uint64_t bits = ops::fill_bits(args.node.attrs.f("value", 0.0), x.dtype);
  const size_t es = dtype_size(x.dtype);
  const int64_t N = x.shape[0], H = x.shape[1], W = x.shape[2], C = x.shape[3], Ho = y.shape[1], Wo = y.shape[2];
  const int64_t top = p[0], left = p[1];
  // Output columns [w0, w1) read input columns w0 - left ..: the rest of the row is padding.
  const int64_t w0 = std::clamp<int64_t>(left, 0, Wo), w1 = std::clamp<int64_t>(W + left, w0, Wo);
  const auto* src = static_cast<const std::byte*>(x.data);
  auto* dst = static_cast<std::byte*>(y.data);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < Ho; ++h) {
      std::byte* row = dst + ((n * Ho + h) * Wo) * C * static_cast<int64_t>(es);
      const int64_t hs = h - top;
      if (hs < 0 || hs >= H) {
        fill_values(row, Wo * C, bits, es);
        continue;
      }
      fill_values(row, w0 * C, bits, es);
      if (w1 > w0)
        std::memcpy(row + w0 * C * static_cast<int64_t>(es),
                    src + ((n * H + hs) * W + (w0 - left)) * C * static_cast<int64_t>(es),
                    static_cast<size_t>((w1 - w0) * C) * es);
      fill_values(row + w1 * C * static_cast<int64_t>(es), (Wo - w1) * C, bits, es);
    }
}

void channel_slice(const KernelArgs& args) {
  expect_arity(args, 1, 1);
  const TensorView &x = args.in[0], &y = args.out[0];
  expect_dtype(args, y, x.dtype, "the output");
  const int64_t start = args.node.attrs.i("start", 0);
  const int64_t cx = x.shape.empty() ? 0 : x.shape.back(), cy = y.shape.empty() ? 0 : y.shape.back();
  if (cx <= 0 || cy <= 0 || x.shape.size() != y.shape.size() || x.numel() / cx != y.numel() / cy ||
      cy != args.node.attrs.i("channels", 0))
    throw Error("node '" + args.node.name + "' (op channel_slice): input " + shape_str(x.shape) + " and output " +
                shape_str(y.shape) + " differ in more than the last axis, or the output is not 'channels' wide");
  const size_t es = dtype_size(x.dtype);
  const int64_t rows = y.numel() / cy;
  // Output channels [c0, c1) read input channels c0 + start ..; the others are zeros.
  const int64_t c0 = std::clamp<int64_t>(-start, 0, cy), c1 = std::clamp<int64_t>(cx - start, c0, cy);
  const auto* src = static_cast<const std::byte*>(x.data);
  auto* dst = static_cast<std::byte*>(y.data);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    std::byte* out = dst + r * cy * static_cast<int64_t>(es);
    std::memset(out, 0, static_cast<size_t>(c0) * es);
    std::memcpy(out + c0 * static_cast<int64_t>(es), src + (r * cx + c0 + start) * static_cast<int64_t>(es),
                static_cast<size_t>(c1 - c0) * es);
    std::memset(out + c1 * static_cast<int64_t>(es), 0, static_cast<size_t>(cy - c1) * es);  // +0 in every float type
  }
}

}  // namespace trident::cpu_ref
