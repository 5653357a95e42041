// Runs the pipeline: verify after every pass, optional dumps, user-disabled passes skipped
// (a required pass cannot be disabled: the graph would be wrong, not just slower).
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "passes/pass.h"

namespace trident::passes {

std::string_view mode_name(Mode m) { return m == Mode::Train ? "train" : "infer"; }

namespace {
// Each dump is written atomically (core/atomic_file.h): a link or a FIFO planted at its name is
// refused, never written through.
void dump(const ir::Graph& g, const std::string& dir, int index, const std::string& name) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("cannot create the IR dump directory '" + dir + "': " + ec.message());
  std::ostringstream file;
  file << dir << "/" << std::setw(2) << std::setfill('0') << index << "_" << name << ".txt";
  const std::string text = ir::print(g);
  try {
    write_file_atomically(file.str(), text.data(), text.size());
  } catch (const Error& e) {
    throw Error(std::string("cannot write the IR dump: ") + e.what());
  }
}
}  // namespace

void PassManager::run(ir::Graph& g, PassContext& ctx) const {
  const auto& disabled = ctx.options.disabled_passes;
  for (const std::string& d : disabled) {
    bool known = false;
    for (const Pass& p : passes_) {
      if (p.name != d) continue;
      known = true;
      if (p.required) throw Error("pass '" + d + "' is required in this mode and cannot be disabled");
    }
    if (!known) {
      std::string names;
      for (const Pass& p : passes_) names += (names.empty() ? "" : ", ") + p.name;
      throw Error("unknown pass '" + d + "' (passes in this pipeline: " + names + ")");
    }
  }
  ir::verify(g);
  if (!ctx.options.dump_dir.empty()) dump(g, ctx.options.dump_dir, 0, "input");
  int index = 0;
  for (const Pass& p : passes_) {
    ++index;
    if (std::find(disabled.begin(), disabled.end(), p.name) != disabled.end()) continue;
    p.run(g, ctx);
    ctx.applied.push_back(p.name);
    try {
      ir::verify(g);
    } catch (const Error& e) {
      throw Error("pass '" + p.name + "' left an invalid graph: " + e.what());
    }
    if (!ctx.options.dump_dir.empty()) dump(g, ctx.options.dump_dir, index, p.name);
  }
}

namespace {
// A strategy the user switched on needs the backend's kernels for the forms it makes.
void require_kernels(const CompileOptions& opt, bool has_kernels, const std::string& pass) {
  if (!has_kernels) throw Error(pass + " makes forms that backend '" + opt.backend + "' has no kernels for");
}
}  // namespace

PassManager standard_pipeline(Mode mode, const CompileOptions& opt) {
  PassManager pm;
  if (mode == Mode::Infer) {
    pm.add({"set_batchnorm_mode", set_batchnorm_mode, true});
    pm.add({"remove_dropout", remove_dropout, true});
    pm.add({"fold_bn", fold_bn, false, true});
    pm.add({"fuse_silu", fuse_silu, false, true});
    pm.add({"fuse_bn_relu", fuse_bn_relu, false, true});
    pm.add({"fuse_conv_epilogue", fuse_conv_epilogue, false, true});
    if (opt.int8.stage != Int8Options::Stage::off) {
      if (!opt.traits.int8_convolution)
        throw Error("backend '" + opt.backend +
                    "' has no int8 convolution kernels; int8 runs where the backend's kernels include them "
                    "(the CPU backends)");
      pm.add({"quantize_int8", quantize_int8, true});
    } else if (opt.traits.int8_convolution) {
      // An imported QDQ model's quantized convolution inputs, where the backend has int8 kernels.
      pm.add({"quantize_int8", quantize_int8, false, true});
    }
    if (opt.precision != DType::f32) pm.add({"assign_precision", assign_precision, true});
    if (opt.pads_channels()) pm.add({"pad_channels", pad_channels, false});
  } else {
    pm.add({"fuse_silu", fuse_silu, false, true});
    pm.add({"fuse_conv_bn_relu", fuse_conv_bn_relu, false, true});
    pm.add({"fuse_bn_relu", fuse_bn_relu, false, true});
    pm.add({"cancel_conv_bias", cancel_conv_bias, false, true});
    pm.add({"attach_loss", attach_loss, true});
    if (opt.precision != DType::f32) pm.add({"assign_precision", assign_precision, true});
    if (opt.pads_channels()) pm.add({"pad_channels", pad_channels, false});
    if (opt.precision != DType::f32) pm.add({"group_weight_casts", group_weight_casts, false, true});
    if (opt.packs_relu_mask()) pm.add({"pack_relu_mask", pack_relu_mask, false, true});
    pm.add({"seed_dropout", seed_dropout, true});
    pm.add({"autodiff", autodiff, true});
    pm.add({"join_channel_gradients", join_channel_gradients, false, true});
    if (opt.optimizer) pm.add({"append_optimizer", append_optimizer, true});
    if (opt.distributed) pm.add({"allreduce_gradients", allreduce_gradients, true});
    // Where the backend's optimizer reads f16/bf16 gradients itself.
    if (opt.optimizer && opt.precision != DType::f32 && opt.traits.low_precision_gradients)
      pm.add({"fold_gradient_cast", fold_gradient_cast, false, true});
    pm.add({"fold_gradient_sum", fold_gradient_sum, false, true});
    // The window index first: a pooling whose backward no longer reads its input may take
    // the previous layer's batchnorm apply as its prologue.
    if (opt.saves_maxpool_index()) {
      require_kernels(opt, opt.traits.maxpool_window_index, "save_maxpool_index");
      pm.add({"save_maxpool_index", save_maxpool_index, false, true});
    }
    if (opt.defers_bn_apply()) {
      require_kernels(opt, opt.traits.deferred_bn_apply, "defer_bn_apply");
      pm.add({"defer_bn_apply", defer_bn_apply, false, true});
    }
    // On the index's backward (where save_maxpool_index made one): the batchnorm backward
    // reading it routes the gradient itself.
    pm.add({"fold_maxpool_gradient", fold_maxpool_gradient, false, true});
  }
  pm.add({"dce", dead_code_elimination, false});
  // After dce, which has removed the input gradient of the layers whose input needs none.
  if (mode == Mode::Train && opt.fuses_cbr_weight_backward()) {
    require_kernels(opt, opt.traits.cbr_weight_backward, "fuse_cbr_weight_backward");
    pm.add({"fuse_cbr_weight_backward", fuse_cbr_weight_backward, false, true});
  }
  pm.add({"fuse_elementwise", fuse_elementwise, false, true});
  if (mode == Mode::Infer) pm.add({"reuse_residual_buffer", reuse_residual_buffer, false});
  if (mode == Mode::Train) pm.add({"reuse_gradient_buffer", reuse_gradient_buffer, false});
  return pm;
}

}  // namespace trident::passes
