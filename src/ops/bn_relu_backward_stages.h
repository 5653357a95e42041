// The stages of batchnorm_relu_backward (and the batchnorm part of cbr_weight_backward), read
// once from a node: how the relu's mask is known, where dy comes from, whether the relu was
// clipped and whether the masked gradient is also the residual's. The op's shape inference and
// decomposition, the passes that extend the node and every backend's kernel read this struct
// instead of counting inputs or looking at a mask's dtype, so what an operand means is decided
// here alone (the forward fused convolution's counterpart is ops/conv_stages.h):
//
//   dy [+ dy_other | routed through a max pooling's window index]
//     → · relu mask (y > 0 from y, its packed bits or the affine that recomputes y; 0 < y < m when clipped)
//     → [dresidual] → batchnorm backward → dconv, dgamma, dbeta
#pragma once
#include <cstddef>
#include <string>

#include "ir/graph.h"

namespace trident::ops {

struct BnReluBackwardStages {
  // Where y > 0 comes from: the relu output y itself, its packed 1-bit mask (i32,
  // core/relu_mask.h; pack_relu_mask) or the [2, C] f32 affine that recomputes y from conv_out
  // (defer_bn_apply).
  enum class Mask { relu_output, bits, affine };
  // What dy is: as given; the sum of dy and a second gradient dy_other (fold_gradient_sum);
  // the gradient of a max pooling of y, routed to its cells by the pooling's window index,
  // whose window is in the node's pooling attributes (attribute pooled_dy, fold_maxpool_gradient).
  enum class Dy { plain, plus_other, pooled };

  Mask mask = Mask::relu_output;
  Dy dy = Dy::plain;
  bool clipped = false;    // the relu was clip(0, relu_max) (ReLU6); masked from y alone
  double relu_max = 0;     // its bound where clipped
  bool residual_gradient = false;  // output dresidual: the masked gradient, the residual's (attribute residual)

  // The stages of a batchnorm_relu_backward or cbr_weight_backward node of `g`; an Error for
  // another op. The mask kind is read from the mask operand's type.
  static BnReluBackwardStages of(const ir::Node& n, const ir::Graph& g);
  // The stages that depend on attributes and arity alone (no mask kind), for passes that ask
  // before the graph holds the node's inputs' types.
  static Dy dy_of(const ir::Node& n);

  size_t inputs() const { return dy == Dy::plain ? 6 : 7; }
  size_t outputs() const { return residual_gradient ? 4 : 3; }
  // "dy + dy_other → relu mask (packed bits) → dresidual → batchnorm backward", for explain and messages.
  std::string describe() const;
};

}  // namespace trident::ops
