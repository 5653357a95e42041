// The distributed world: the processes of one data-parallel job, their ranks and the
// collectives that join them. One interface, so the trainer, the CLI and the collective kernels
// never see the library underneath (MPI, in mpi_world.cpp; the cuda backend builds its NCCL
// communicator from this world: backends/cuda/nccl_communicator.h). A run without a launcher has no world at all (nullptr), and
// then trident is the single-process engine it always was: MPI is not even initialised.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace trident::distributed {

class World {
 public:
  virtual ~World() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The rank among the processes of this machine (which device a process takes).
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  // Sums `count` elements over every rank, in place; every rank gets the same bits (the
  // reduction is commutative, and MPI's reduction order for one call is the same everywhere).
  virtual void sum(float* data, size_t count) = 0;
  virtual void sum(double* data, size_t count) = 0;
  // Copies `bytes` bytes from rank `root`'s `data` into every other rank's `data` (how the
  // NCCL communicator's unique id reaches the ranks).
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Blocks until every rank has arrived.
  virtual void barrier() = 0;
  // Collective: the ranks that pass the same `color` form a new world, ranked in this world's
  // order (--bn-group's sync-BN groups). Its collectives join only them; abort() still ends
  // the whole job.
  virtual std::shared_ptr<World> split(int color) = 0;
  // Ends every process of the job with exit status `code`; the caller has printed why.
  [[noreturn]] virtual void abort(int code) = 0;
};

// True when this process was started by an MPI launcher (mpirun, srun with PMI/PMIx): the
// variables Open MPI, MPICH, Slurm's PMI and PMIx set for each rank.
bool launched_by_mpi();

// The world this process belongs to: an MPI world (MPI initialised now, finalised when the last
// reference goes) when launched_by_mpi(), else nullptr. Where trident was built without MPI, a
// launched process gets an Error saying so.
std::shared_ptr<World> join_world();

// True where this build has the MPI world (TRIDENT_WITH_MPI found MPI).
bool mpi_available();

// "rank 1 of 2", for messages.
std::string rank_text(const World& w);

}  // namespace trident::distributed
