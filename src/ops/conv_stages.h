// The stages of a fused convolution, read once from a node's op and attributes. Every fused
// convolution trident builds — cbr, cbar and conv_bn_stats in training, conv2d_epilogue in
// inference — is one ordered list of optional stages, as a oneDNN primitive with post-ops or a
// cuDNN operation graph describes it:
//
//   [input affine + relu] → [int8 operands] → convolution → [bias] → [batch statistics → affine (or stop there)]
//     → [int8 grid] → [+ residual (· its affine)] → [relu or clip(0, m), or an activation] → [int8 grid]
//     → [1-bit mask]
//
// The decompositions, the passes that build or extend these nodes, `explain` and every
// backend's kernel read this struct instead of the attributes, so what a stage means is
// decided here alone; shape inference validates the combination (ops/fused_cbr.cpp,
// ops/fused_inference.cpp). Where each operand sits is ops/cbr_operands.h's.
#pragma once
#include <string>

#include "ir/graph.h"
#include "ops/activation_math.h"

namespace trident::ops {

struct ConvStages {
  enum class Residual { none, plain, with_affine };

  bool input_affine = false;    // the convolution reads relu(x·scale + shift) (attribute prologue)
  bool bias = false;            // the node has a bias operand
  bool bias_cancelled = false;  // ...that the batch mean cancels: only the running mean takes it
  bool batch_statistics = false;  // training batchnorm over the convolution output
  bool apply_affine = false;      // the batchnorm's affine is applied; conv_bn_stats stops at it
  bool exact_affine = false;      // conv_bn_stats: the affine is kept exact for an f32 reader
  Residual residual = Residual::none;
  bool relu = false;
  bool clipped = false;  // the relu is clip(0, relu_max) (ReLU6), attribute relu_max
  double relu_max = 0;   // the clip's bound where clipped
  bool bit_mask = false;  // a 1-bit relu mask output for the backward (attribute relu_mask)
  // conv2d_epilogue: a point-wise activation in the relu's place (attribute activation, a fn of
  // ops/activation.h, with activation_alpha and activation_beta for hardsigmoid): EfficientNet's
  // SiLU, MobileNet v3's hardswish.
  bool activation = false;
  ActivationParams activation_params;
  // conv2d_epilogue in int8 (passes/quantize_int8.cpp): the input is read on the int8 grid of
  // a calibrated scale (attribute int8_input_scale; u8 where int8_unsigned, else s8) and the
  // weights on per-output-channel s8 grids; the output stays f32 (ops/int8_quant.h).
  bool int8 = false;
  double int8_input_scale = 0;
  bool int8_unsigned = false;
  // An imported QDQ model's pairs after an int8 convolution (passes/quantize_int8.cpp): its
  // f32 output snapped to a pair's grid (ops/int8_quant.h) before the residual add (attributes
  // mid_quant_scale, _unsigned, _zero_point) and/or last (out_quant_...).
  struct Grid {
    bool on = false;
    double scale = 0;
    bool is_unsigned = false;
    int64_t zero_point = 0;
  };
  Grid mid_quant, out_quant;

  // The stages of a cbr, cbar, conv_bn_stats or conv2d_epilogue node; an Error for another op.
  static ConvStages of(const ir::Node& n);
  // Writes grid `g` as the attributes `prefix`_scale, _unsigned, _zero_point ("mid_quant", "out_quant").
  static void set_grid(ir::Attrs& attrs, const std::string& prefix, const Grid& g);
  // Whether `op` is one of those.
  static bool is_fused_convolution(const std::string& op);
  // The stages in order, "input affine+relu → conv → bias → batch statistics → affine → add
  // residual → relu → bit mask", for explain and messages.
  std::string describe() const;
};

}  // namespace trident::ops
