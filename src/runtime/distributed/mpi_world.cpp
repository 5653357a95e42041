// The MPI world: the one file that includes mpi.h. MPI is initialised when the first world is
// made and finalised when the last reference to it goes; collectives run on MPI_COMM_WORLD from
// the thread that initialised it (the trainer's), so MPI_THREAD_FUNNELED suffices. Errors in
// MPI abort the job (MPI_ERRORS_ARE_FATAL, the default), which is what a failed collective
// should do to a data-parallel run.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "core/error.h"
#include "runtime/distributed/world.h"

namespace trident::distributed {

namespace {

class MpiWorld final : public World {
 public:
  MpiWorld() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw Error("MPI_Init_thread failed: this process cannot join the job mpirun started");
      owns_init_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_);
    MPI_Comm_rank(node_, &local_rank_);
    MPI_Comm_size(node_, &local_size_);
  }
  ~MpiWorld() override {
    MPI_Comm_free(&node_);
    if (owns_init_) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  void sum(float* data, size_t count) override { sum_in_place(data, count, MPI_FLOAT); }
  void sum(double* data, size_t count) override { sum_in_place(data, count, MPI_DOUBLE); }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this keeps the promise if it ever did
  }

 private:
  // MPI counts are ints: a longer span goes in pieces of at most INT_MAX elements.
  template <class T>
  void sum_in_place(T* data, size_t count, MPI_Datatype type) {
    while (count > 0) {
      const int n = static_cast<int>(std::min<size_t>(count, INT_MAX));
      MPI_Allreduce(MPI_IN_PLACE, data, n, type, MPI_SUM, MPI_COMM_WORLD);
      data += n;
      count -= static_cast<size_t>(n);
    }
  }

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm node_ = MPI_COMM_NULL;
  bool owns_init_ = false;
};

}  // namespace

std::shared_ptr<World> make_mpi_world() {
  static std::weak_ptr<World> existing;  // MPI can be initialised once per process
  if (auto w = existing.lock()) return w;
  auto w = std::make_shared<MpiWorld>();
  existing = w;
  return w;
}

}  // namespace trident::distributed
