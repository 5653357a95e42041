// quantize_dequantize: what an int8 kernel does to an operand before it multiplies, written as an
// f32 → f32 op (the value snapped to its int8 grid and scaled back), so that an int8 convolution
// has a decomposition cpu_ref can run and every integer kernel is checked against it
// (ops/int8_quant.h has the arithmetic). Two forms: a calibrated per-tensor scale for activations
// (attributes scale, unsigned, and zero_point where an imported QDQ model names one), or per
// output channel (axis 0) from the tensor's own largest magnitudes for weights (per_channel = 1).
#include <cmath>

#include "ops/op_helpers.h"

namespace trident::ops {

void register_quantize_ops() {
  ir::OpDef q = op_def("quantize_dequantize", {"x"}, {"y"},
                       "y = scale·(clamp(round(x/scale) + zero_point) − zero_point) on the int8 grid: per tensor (scale, "
                       "unsigned, zero_point) or per output channel (per_channel)");
  q.infer = [](const Node& n, const Graph& g) {
    const ir::Value& x = in_value(g, n, 0);
    if (x.dtype != DType::f32 && x.dtype != DType::f64) throw Error("quantizes f32 (or f64) values only");
    if (n.attrs.i("per_channel", 0) != 0) {
      if (x.shape.empty() || x.shape[0] < 1) throw Error("per_channel needs an output-channel axis 0");
    } else {
      const double s = n.attrs.f("scale", 0.0);
      if (!(s > 0) || !std::isfinite(s)) throw Error("attribute scale must be positive and finite");
      const int64_t z = n.attrs.i("zero_point", 0);
      const bool is_unsigned = n.attrs.i("unsigned", 0) != 0;
      if (is_unsigned ? z < 0 || z > 255 : z < -128 || z > 127)
        throw Error("attribute zero_point " + std::to_string(z) + " is outside the " + (is_unsigned ? "u8" : "s8") +
                    " range");
    }
    return std::vector<TypeInfo>{{x.shape, x.dtype}};
  };
  ir::OpRegistry::add(q);
}

}  // namespace trident::ops
