// Typed access to node attributes, with errors that name the attribute.
#include "ir/attrs.h"

#include <sstream>

#include "core/error.h"

namespace trident::ir {

namespace {
template <class T>
const T& get(const std::map<std::string, AttrValue>& m, const std::string& key, const char* kind) {
  auto it = m.find(key);
  if (it == m.end()) throw Error("attribute '" + key + "' is missing");
  if (!std::holds_alternative<T>(it->second))
    throw Error("attribute '" + key + "' must be " + kind);
  return std::get<T>(it->second);
}
}  // namespace

int64_t Attrs::i(const std::string& key) const { return get<int64_t>(map_, key, "an integer"); }
int64_t Attrs::i(const std::string& key, int64_t fallback) const {
  return has(key) ? i(key) : fallback;
}
double Attrs::f(const std::string& key) const {
  auto it = map_.find(key);
  if (it != map_.end() && std::holds_alternative<int64_t>(it->second))
    return static_cast<double>(std::get<int64_t>(it->second));
  return get<double>(map_, key, "a number");
}
double Attrs::f(const std::string& key, double fallback) const {
  return has(key) ? f(key) : fallback;
}
const std::string& Attrs::s(const std::string& key) const {
  return get<std::string>(map_, key, "a string");
}
const std::vector<int64_t>& Attrs::ints(const std::string& key) const {
  return get<std::vector<int64_t>>(map_, key, "a list of integers");
}

std::string Attrs::to_string() const {
  std::ostringstream os;
  bool first = true;
  for (const auto& [k, v] : map_) {
    os << (first ? "" : " ") << k << "=";
    first = false;
    if (auto p = std::get_if<int64_t>(&v)) os << *p;
    else if (auto d = std::get_if<double>(&v)) os << *d;
    else if (auto s = std::get_if<std::string>(&v)) os << '"' << *s << '"';
    else {
      const auto& l = std::get<std::vector<int64_t>>(v);
      os << "[";
      for (size_t j = 0; j < l.size(); ++j) os << (j ? "," : "") << l[j];
      os << "]";
    }
  }
  return os.str();
}

}  // namespace trident::ir
