// BackendOptions' one derived choice that needs the distributed world's definition: which world,
// if any, a batchnorm's statistics span (sync-BN).
#include "backends/backend_options.h"

#include "runtime/distributed/world.h"

namespace trident {

distributed::World* BackendOptions::batchnorm_world() const {
  if (!sync_batchnorm || !world) return nullptr;
  distributed::World* spans = batchnorm_group ? batchnorm_group.get() : world.get();
  return spans->size() > 1 ? spans : nullptr;
}

}  // namespace trident
