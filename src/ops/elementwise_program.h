// Parsing of the `elementwise` op's programs attribute, shared by the op definition, the
// fusion pass that writes it and the kernels that run it.
#pragma once
#include <string>
#include <vector>

namespace trident::ops {

// "add:1,relu;relu" → {{"add:1", "relu"}, {"relu"}}
std::vector<std::vector<std::string>> parse_elementwise_programs(const std::string& text);

}  // namespace trident::ops
