// BackendOptions' one derived choice that needs the distributed world's definition: which world,
// if any, a batchnorm's statistics span (sync-BN).
#include "backends/backend_options.h"

#include "core/world.h"

namespace trident {

distributed::World* BackendOptions::batchnorm_world() const {
  if (!sync_batchnorm || !world) return nullptr;
  if (batchnorm_group) return batchnorm_group->size() > 1 ? batchnorm_group.get() : nullptr;
  return world.get();
}

}  // namespace trident
