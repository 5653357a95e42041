// quantize_dequantize on the "cpu" backend. Inside an int8 convolution the integer kernel
// quantizes its own operands; this op runs where an imported QDQ model quantizes a tensor no
// int8 convolution takes over (a residual add's inputs, the first layer, a linear layer), so
// it is one parallel pass over the tensor with ops/int8_quant.h's rounding, the same values as
// cpu_ref's loop. The per-channel (weights) form only appears inside decompositions: cpu_ref's.
#include "backends/cpu/kernels.h"
#include "backends/cpu/ref_kernels.h"
#include "ops/int8_quant.h"

namespace trident::cpu {

namespace {

class QuantizePerTensor final : public Kernel {
 public:
  QuantizePerTensor(const ir::Node& node, const ir::Graph& g)
      : scale_(static_cast<float>(node.attrs.f("scale", 1.0))),
        grid_(ops::int8_grid(node.attrs.i("unsigned", 0) != 0, static_cast<int>(node.attrs.i("zero_point", 0)))) {
    expect_f32(node, g);
  }

  void run(const KernelArgs& a) override {
    const int64_t n = a.in[0].numel();
    const float* x = a.in[0].as<float>();
    float* y = a.out[0].as<float>();
    const float inverse = 1.0f / scale_, scale = scale_;
    const ops::Int8Grid grid = grid_;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = ops::int8_level(x[i], inverse, grid) * scale;
  }

 private:
  float scale_;
  ops::Int8Grid grid_;
};

}  // namespace

void register_quantize_kernels() {
  add_factory("quantize_dequantize", [](const ir::Node& node, const ir::Graph& g,
                                        const CpuContext&) -> std::unique_ptr<Kernel> {
    if (node.attrs.i("per_channel", 0) != 0) return std::make_unique<RefLoop<cpu_ref::quantize_dequantize>>(node, g);
    return std::make_unique<QuantizePerTensor>(node, g);
  });
}

}  // namespace trident::cpu
