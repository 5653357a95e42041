// BackendOptions' one derived choice that needs the distributed world's definition (which world,
// if any, a batchnorm's statistics span: sync-BN), and where timed choices persist by default.
#include "backends/backend_options.h"

#include <cstdlib>

#include "core/world.h"

namespace trident {

distributed::World* BackendOptions::batchnorm_world() const {
  if (!sync_batchnorm || !world) return nullptr;
  if (batchnorm_group) return batchnorm_group->size() > 1 ? batchnorm_group.get() : nullptr;
  return world.get();
}

std::string default_plan_cache_dir() {
  const auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::string(v) : std::string();
  };
  if (std::string dir = set("TRIDENT_PLAN_CACHE"); !dir.empty()) return dir;
  if (std::string xdg = set("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/trident";
  if (std::string home = set("HOME"); !home.empty()) return home + "/.cache/trident";
  return "";
}

}  // namespace trident
