// The list of op families: one line per file in src/ops.
#include "ir/op_registry.h"

namespace trident::ops {
void register_conv_ops();
void register_batchnorm_ops();
void register_elementwise_ops();
void register_pool_ops();
void register_shape_ops();
void register_linear_ops();
void register_loss_ops();
void register_optimizer_ops();
void register_fused_cbr_ops();
void register_fused_inference_ops();
void register_elementwise_fused_ops();
void register_tensor_ops();
void register_activation_ops();
void register_precision_ops();
void register_channel_ops();
void register_relu_mask_ops();
void register_bn_apply_ops();
void register_collective_ops();
void register_bn_relu_ops();
void register_pad_ops();
void register_layernorm_ops();
void register_cbr_weight_backward_ops();
void register_dropout_ops();
void register_quantize_ops();
}  // namespace trident::ops

namespace trident::ir {

void register_builtin_ops() {
  ops::register_conv_ops();
  ops::register_batchnorm_ops();
  ops::register_elementwise_ops();
  ops::register_pool_ops();
  ops::register_shape_ops();
  ops::register_linear_ops();
  ops::register_loss_ops();
  ops::register_optimizer_ops();
  ops::register_fused_cbr_ops();
  ops::register_fused_inference_ops();
  ops::register_elementwise_fused_ops();
  ops::register_tensor_ops();
  ops::register_activation_ops();
  ops::register_precision_ops();
  ops::register_channel_ops();
  ops::register_relu_mask_ops();
  ops::register_bn_apply_ops();
  ops::register_collective_ops();
  ops::register_bn_relu_ops();
  ops::register_pad_ops();
  ops::register_layernorm_ops();
  ops::register_cbr_weight_backward_ops();
  ops::register_dropout_ops();
  ops::register_quantize_ops();
}

}  // namespace trident::ir
