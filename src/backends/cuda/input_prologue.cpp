// The input prologue's apply kernel (input_prologue.h).
#include "backends/cuda/input_prologue.h"

#include "backends/cuda/build_timing.h"
#include "backends/cuda/device/cast.h"
#include "backends/cuda/device/conv_device.h"
#include "backends/cuda/device/launch.h"
#include "backends/cuda/kernels.h"

namespace trident::cuda {

namespace {

device::ChannelAffineArgs apply_args(const ConvProblem& p, const void* x, const void* affine, void* activated) {
  const auto io = device::elem_type(p.dtype);
  if (!io) throw Error("the cuda backend computes in f32, f16 or bf16, not " + std::string(dtype_name(p.dtype)));
  device::ChannelAffineArgs a;
  a.io = *io;
  a.x = x;
  a.scale = static_cast<const float*>(affine);
  a.shift = static_cast<const float*>(affine) + p.C;
  a.shift_type = device::ElemType::f32;
  a.y = activated;
  a.rows = p.N * p.H * p.W;
  a.channels = p.C;
  a.relu = true;
  return a;
}

}  // namespace

size_t input_bytes(const ConvProblem& p) {
  return static_cast<size_t>(p.N * p.H * p.W * p.C) * dtype_size(p.dtype);
}

void enqueue_input_apply(const ConvProblem& p, const void* x, const void* affine, void* activated, CudaContext& ctx) {
  device::launch_channel_affine(apply_args(p, x, affine, activated), ctx.stream());
}

float time_input_apply(const ConvProblem& p, CudaContext& ctx) {
  TimingScratch scratch;
  void* x = scratch.get(input_bytes(p));
  void* y = scratch.get(input_bytes(p));
  void* affine = scratch.get(2 * static_cast<size_t>(p.C) * sizeof(float));
  if (!x || !y || !affine) return 0.f;
  const device::ChannelAffineArgs a = apply_args(p, x, affine, y);
  return best_of_three_ms(ctx.stream(), [&] {
    device::launch_channel_affine(a, ctx.stream());
    return true;
  });
}

PrologueGraph build_prologue_graph(CudaContext& ctx, DType io, const std::function<GraphDesc(const InputPrologue&)>& describe) {
  std::vector<InputPrologue> variants;
  for (DType affine : {io, DType::f32})
    for (DType activated : {io, DType::f32}) {
      InputPrologue v{true, affine, activated};
      if (affine != DType::f16 && affine != DType::f32) continue;
      bool seen = false;
      for (const InputPrologue& w : variants) seen |= w.affine == v.affine && w.activated == v.activated;
      if (!seen) variants.push_back(v);
    }
  PrologueGraph first;
  for (const InputPrologue& v : variants) {
    PrologueGraph g{cached_graph(ctx, describe(v)), v};
    if (g.build.graph) return g;
    if (first.build.failure.empty()) first = g;
  }
  return first;
}

size_t affine_copy_bytes(const ConvProblem& p, const InputPrologue& prologue) {
  return prologue.affine == DType::f32 ? 0 : 2 * static_cast<size_t>(p.C) * dtype_size(prologue.affine);
}

void bind_prologue_affine(const ConvProblem& p, const InputPrologue& prologue, const void* affine, void* copy,
                          std::array<void*, kMaxGraphUid + 1>& pointers, CudaContext& ctx) {
  const void* scale = affine;
  if (prologue.affine != DType::f32) {
    device::launch_cast(device::ElemType::f32, affine, *device::elem_type(prologue.affine), copy, 2 * p.C, ctx.stream());
    scale = copy;
  }
  const size_t shift_offset = static_cast<size_t>(p.C) * dtype_size(prologue.affine);
  pointers[conv_uid::x_scale] = const_cast<void*>(scale);
  pointers[conv_uid::x_shift] = static_cast<char*>(const_cast<void*>(scale)) + shift_offset;
}

}  // namespace trident::cuda
