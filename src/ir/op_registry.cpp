// The op table. Built-in ops register themselves through register_builtin_ops(), called
// lazily on first lookup, so static libraries never drop an op's object file.
#include "ir/op_registry.h"

#include <algorithm>
#include <mutex>

#include "core/error.h"

namespace trident::ir {

std::map<std::string, OpDef>& OpRegistry::table() {
  static std::map<std::string, OpDef> t;
  return t;
}

namespace {
std::once_flag g_builtin_once;
void ensure_builtins() { std::call_once(g_builtin_once, [] { register_builtin_ops(); }); }
}  // namespace

const OpDef& OpRegistry::get(const std::string& name) {
  ensure_builtins();
  auto it = table().find(name);
  if (it == table().end()) throw Error("unknown op '" + name + "'");
  return it->second;
}

bool OpRegistry::has(const std::string& name) {
  ensure_builtins();
  return table().count(name) != 0;
}

void OpRegistry::add(OpDef def) {
  if (!def.aliases) def.aliases = [](const Node&) { return std::vector<std::pair<int, int>>{}; };
  if (!def.side_effects) def.side_effects = [](const Node&) { return false; };
  if (!def.macs) def.macs = [](const Node&, const Graph&) { return int64_t{0}; };
  // An optional input shifts the positions after it, so only inputs with a fixed position (no
  // optional one before them) can be named here.
  for (const std::string& f : def.f32_inputs) {
    const auto it = std::find(def.inputs.begin(), def.inputs.end(), f);
    const bool fixed = it != def.inputs.end() && !def.variadic &&
                       std::none_of(def.inputs.begin(), it, [](const std::string& in) { return in.back() == '?'; });
    TRIDENT_CHECK(fixed, "op '" + def.name + "' keeps f32 an input '" + f + "' whose position is not fixed");
  }
  std::string name = def.name;
  table()[name] = std::move(def);
}

std::vector<std::string> OpRegistry::names() {
  ensure_builtins();
  std::vector<std::string> out;
  for (const auto& [k, v] : table()) out.push_back(k);
  return out;
}

void OpDef::check_arity(const Node& n) const {
  if (variadic) return;
  size_t max_in = inputs.size();
  size_t min_in = max_in;
  while (min_in > 0 && inputs[min_in - 1].back() == '?') --min_in;  // trailing optional inputs
  if (n.inputs.size() < min_in || n.inputs.size() > max_in)
    throw Error("expects " + std::to_string(min_in) +
                (min_in + 1 == max_in ? " or " + std::to_string(max_in) : min_in != max_in ? " to " + std::to_string(max_in) : "") +
                " inputs, got " +
                std::to_string(n.inputs.size()));
}

bool OpDef::keeps_f32(size_t i) const {
  return i < inputs.size() && std::find(f32_inputs.begin(), f32_inputs.end(), inputs[i]) != f32_inputs.end();
}

std::string OpDef::output_name(size_t i) const {
  return i < outputs.size() ? outputs[i] : "out" + std::to_string(i);
}

}  // namespace trident::ir
