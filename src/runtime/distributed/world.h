// Which distributed world a process joins: the processes of one data-parallel job (the World
// interface is core/world.h). A run without a launcher has no world at all (nullptr), and then
// trident is the single-process engine it always was: MPI is not even initialised. The MPI world
// itself is mpi_world.cpp.
#pragma once
#include <memory>

#include "core/world.h"

namespace trident::distributed {

// True when this process was started by an MPI launcher (mpirun, srun with PMI/PMIx): the
// variables Open MPI, MPICH, Slurm's PMI and PMIx set for each rank.
bool launched_by_mpi();

// The world this process belongs to: an MPI world (MPI initialised now, finalised when the last
// reference goes) when launched_by_mpi(), else nullptr. Where trident was built without MPI, a
// launched process gets an Error saying so.
std::shared_ptr<World> join_world();

// True where this build has the MPI world (TRIDENT_WITH_MPI found MPI).
bool mpi_available();

}  // namespace trident::distributed
