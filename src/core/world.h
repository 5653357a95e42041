// A process group's interface: its ranks and the collectives that join them. It sits in core/ so
// that the collective kernels of every backend, the trainer and the CLI share it while none of
// them sees the library underneath: runtime/distributed/ makes the MPI world (mpi_world.cpp) and
// says which world a process joins; the cuda backend builds its NCCL communicator from a World
// (backends/cuda/nccl_communicator.h). A run without a launcher has no world at all (nullptr).
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

// "rank 1 of 2", for messages.
inline std::string rank_text(const World& w) {
  return "rank " + std::to_string(w.rank()) + " of " + std::to_string(w.size());
}

}  // namespace trident::distributed
