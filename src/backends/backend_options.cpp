// BackendOptions' one derived choice that needs the distributed world's definition: which world,
// if any, a batchnorm's statistics span (sync-BN).
#include "backends/backend_options.h"

#include "runtime/distributed/world.h"

namespace trident {

distributed::World* BackendOptions::batchnorm_world() const {
  return sync_batchnorm && world && world->size() > 1 ? world.get() : nullptr;
}

}  // namespace trident
