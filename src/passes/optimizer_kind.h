// Which optimizer a training graph ends with (the append_optimizer pass): SGD (sgd_update) or
// AdamW (adamw_update). Named once here, so the command line, the checkpoint metadata and the
// APIs read and write the same words.
#pragma once
#include <string>
#include <string_view>

namespace trident::passes {

enum class OptimizerKind { Sgd, AdamW };

// "sgd", "adamw".
std::string_view optimizer_kind_name(OptimizerKind k);
// The kind named `name`; an Error sentence listing both for any other word.
OptimizerKind parse_optimizer_kind(const std::string& name);

// Whether `name` is a tensor of optimizer state that append_optimizer adds (SGD's "<p>.momentum";
// AdamW's "<p>.exp_avg", "<p>.exp_avg_sq" and "adamw.step"): the part of a training checkpoint
// that an inference network, or a run with the other optimizer, has no place for.
bool is_optimizer_state_name(std::string_view name);

// torch.optim.AdamW's defaults, which a run choosing AdamW takes for the settings it leaves
// unset (SGD's are CompileOptions' and TrainConfig's own defaults).
inline constexpr double kAdamwDefaultLr = 1e-3;
inline constexpr double kAdamwDefaultWeightDecay = 0.01;

}  // namespace trident::passes
