// The MPI world: the one file that includes mpi.h. MPI is initialised when the first world is
// made and finalised when the last reference to it goes (a split world holds its parent);
// collectives run on the world's communicator (MPI_COMM_WORLD, or one MPI_Comm_split made) from
// the thread that initialised MPI (the trainer's), so MPI_THREAD_FUNNELED suffices. Errors in
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

class MpiWorld final : public World, public std::enable_shared_from_this<MpiWorld> {
 public:
  // The job's world: MPI_COMM_WORLD, MPI initialised here unless it already was.
  MpiWorld() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw Error("MPI_Init_thread failed: this process cannot join the job mpirun started");
      owns_init_ = true;
    }
    describe();
  }
  // A part of `parent`'s ranks, on the communicator MPI_Comm_split made (owned here).
  MpiWorld(std::shared_ptr<const MpiWorld> parent, MPI_Comm comm) : parent_(std::move(parent)), comm_(comm) { describe(); }
  ~MpiWorld() override {
    MPI_Comm_free(&node_);
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
    if (owns_init_) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::shared_ptr<World> split(int color) override {
    MPI_Comm part = MPI_COMM_NULL;
    if (MPI_Comm_split(comm_, color, rank_, &part) != MPI_SUCCESS) throw Error("MPI_Comm_split failed");
    return std::make_shared<MpiWorld>(shared_from_this(), part);
  }
  void sum(float* data, size_t count) override { sum_in_place(data, count, MPI_FLOAT); }
  void sum(double* data, size_t count) override { sum_in_place(data, count, MPI_DOUBLE); }
  void broadcast(void* data, size_t bytes, int root) override {
    in_pieces(static_cast<char*>(data), bytes, [&](char* p, int n) { MPI_Bcast(p, n, MPI_BYTE, root, comm_); });
  }
  void barrier() override { MPI_Barrier(comm_); }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this keeps the promise if it ever did
  }

 private:
  // MPI counts are ints: a longer span goes in pieces of at most INT_MAX elements.
  template <class T, class Call>
  static void in_pieces(T* data, size_t count, Call call) {
    while (count > 0) {
      const int n = static_cast<int>(std::min<size_t>(count, INT_MAX));
      call(data, n);
      data += n;
      count -= static_cast<size_t>(n);
    }
  }
  template <class T>
  void sum_in_place(T* data, size_t count, MPI_Datatype type) {
    in_pieces(data, count, [&](T* p, int n) { MPI_Allreduce(MPI_IN_PLACE, p, n, type, MPI_SUM, comm_); });
  }

  // Rank, size and the ranks of this machine, from the communicator.
  void describe() {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_);
    MPI_Comm_rank(node_, &local_rank_);
    MPI_Comm_size(node_, &local_size_);
  }

  std::shared_ptr<const MpiWorld> parent_;  // keeps MPI initialised while a split world lives
  MPI_Comm comm_ = MPI_COMM_WORLD;
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
