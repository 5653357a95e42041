// A distributed world of one rank without MPI, for tests of the data-parallel plan where no
// launcher runs (the GPU machine has no mpirun): every collective of one rank is the identity,
// so a step under this world must give the bits of a step without one.
#pragma once
#include <cstdlib>
#include <memory>
#include <string>

#include "core/error.h"
#include "runtime/distributed/world.h"

namespace trident::test_support {

class OneRankWorld final : public distributed::World {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void sum(float*, size_t) override {}
  void sum(double*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  std::shared_ptr<World> split(int) override { return std::make_shared<OneRankWorld>(); }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
};

// Whether `e` says this machine has no NCCL library (a GPU test of the NCCL path then skips).
inline bool nccl_missing(const Error& e) {
  return std::string(e.what()).find("libnccl.so.2 could not be loaded") != std::string::npos;
}

}  // namespace trident::test_support
