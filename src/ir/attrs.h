// Node attributes: a small typed dictionary (int, float, string, int list).
// Accessors throw a trident::Error naming the attribute when it is missing or of the wrong kind.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace trident::ir {

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : map_(init) {}

  bool has(const std::string& key) const { return map_.count(key) != 0; }
  void set(const std::string& key, AttrValue v) { map_[key] = std::move(v); }

  int64_t i(const std::string& key) const;
  int64_t i(const std::string& key, int64_t fallback) const;
  double f(const std::string& key) const;
  double f(const std::string& key, double fallback) const;
  const std::string& s(const std::string& key) const;
  const std::vector<int64_t>& ints(const std::string& key) const;

  const std::map<std::string, AttrValue>& items() const { return map_; }
  std::string to_string() const;  // "stride=[1,1] eps=1e-05"

 private:
  std::map<std::string, AttrValue> map_;
};

}  // namespace trident::ir
