// Reference `cast`: f32, f64, f16 and bf16 in any direction through double, rounding to
// nearest even (core/half.h), so the GPU's conversions can be checked bit for bit.
#include "backends/cpu_ref/kernel_checks.h"
#include "backends/cpu_ref/kernels.h"
#include "core/half.h"

namespace trident::cpu_ref {

namespace {

double load(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::f32: return t.as<float>()[i];
    case DType::f64: return t.as<double>()[i];
    case DType::f16: return half_to_float(t.as<uint16_t>()[i]);
    case DType::bf16: return bf16_to_float(t.as<uint16_t>()[i]);
    default: return 0;
  }
}

void store(const TensorView& t, int64_t i, double v) {
  switch (t.dtype) {
    case DType::f32: t.as<float>()[i] = static_cast<float>(v); break;
    case DType::f64: t.as<double>()[i] = v; break;
    // Through f32 first: f64 → f16 directly could round twice differently; the GPU also
    // converts from f32.
    case DType::f16: t.as<uint16_t>()[i] = float_to_half(static_cast<float>(v)); break;
    case DType::bf16: t.as<uint16_t>()[i] = float_to_bf16(static_cast<float>(v)); break;
    default: break;
  }
}

}  // namespace

void cast(const KernelArgs& args) {
  expect_arity(args, 1, 1);
  const TensorView &x = args.in[0], &y = args.out[0];
  for (const TensorView* t : {&x, &y})
    if (!is_floating(t->dtype)) unsupported_dtype(args, t->dtype);
  for (int64_t i = 0; i < x.numel(); ++i) store(y, i, load(x, i));
}

// cast_group: cast i for every input/output pair, exactly as the single op.
void cast_group(const KernelArgs& args) {
  if (args.in.size() != args.out.size() || args.in.empty())
    throw Error("node '" + args.node.name + "' (op cast_group): needs as many outputs as inputs, at least one");
  for (size_t i = 0; i < args.in.size(); ++i) cast(KernelArgs{args.node, {args.in[i]}, {args.out[i]}});
}

}  // namespace trident::cpu_ref
