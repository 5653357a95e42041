// Dropout's training kernels on the reference backend: the mask (ops/dropout_math.h decides
// each element, the same function the GPU calls) and the state's step counter.
#include <cstdint>

#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"
#include "core/half.h"
#include "ops/dropout.h"

namespace trident::cpu_ref {

namespace {

// The stream of this step: the state's key and counter words, read as unsigned.
uint64_t stream_of(const TensorView& rng, uint32_t salt) {
  const int32_t* s = rng.as<int32_t>();
  return ops::dropout_stream(static_cast<uint32_t>(s[0]), static_cast<uint32_t>(s[1]), salt);
}

template <class T, class Convert>
void fill_mask(T* mask, int64_t n, uint64_t stream, const ops::DropoutParams& p, Convert convert) {
  const T kept = convert(p.scale), dropped = convert(0.0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    mask[i] = ops::dropout_keeps(stream, static_cast<uint64_t>(i) / p.group, p.threshold) ? kept : dropped;
}

}  // namespace

void dropout_mask(const KernelArgs& args) {
  expect_arity(args, 1, 1);
  expect_dtype(args, args.in[0], DType::i32, "the random state");
  const ops::DropoutParams p = ops::dropout_params(args.node.attrs);
  const TensorView& m = args.out[0];
  const uint64_t stream = stream_of(args.in[0], p.salt);
  const int64_t n = m.numel();
  switch (m.dtype) {
    case DType::f32: fill_mask(m.as<float>(), n, stream, p, [](double v) { return static_cast<float>(v); }); return;
    case DType::f64: fill_mask(m.as<double>(), n, stream, p, [](double v) { return v; }); return;
    case DType::f16:
      fill_mask(m.as<uint16_t>(), n, stream, p, [](double v) { return float_to_half(static_cast<float>(v)); });
      return;
    case DType::bf16:
      fill_mask(m.as<uint16_t>(), n, stream, p, [](double v) { return float_to_bf16(static_cast<float>(v)); });
      return;
    default: unsupported_dtype(args, m.dtype);
  }
}

void rng_advance(const KernelArgs& args) {
  expect_dtype(args, args.in[0], DType::i32, "the random state");
  const int32_t* in = args.in[0].as<int32_t>();
  int32_t* out = args.out[0].as<int32_t>();
  out[0] = in[0];
  // Wraps after 2^32 steps, as unsigned arithmetic does.
  out[1] = static_cast<int32_t>(static_cast<uint32_t>(in[1]) + 1u);
}

}  // namespace trident::cpu_ref
