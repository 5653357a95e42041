// Whether this process is one rank of a launched job, and which world it joins. The MPI world
// itself is in mpi_world.cpp (the one file that includes mpi.h), built only with MPI; without
// it, a launched process stops with a sentence instead of training alone on a fraction of the data.
#include "runtime/distributed/world.h"

#include <cstdlib>

#include "core/error.h"

namespace trident::distributed {

#ifdef TRIDENT_HAVE_MPI
std::shared_ptr<World> make_mpi_world();  // mpi_world.cpp
bool mpi_available() { return true; }
#else
bool mpi_available() { return false; }
#endif

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

std::shared_ptr<World> join_world() {
  if (!launched_by_mpi()) return nullptr;
#ifdef TRIDENT_HAVE_MPI
  return make_mpi_world();
#else
  throw Error("this process was started by an MPI launcher, but this trident was built without MPI; "
              "rebuild with MPI (Debian: libopenmpi-dev, cmake -DTRIDENT_WITH_MPI=ON) or run it without mpirun");
#endif
}

}  // namespace trident::distributed
