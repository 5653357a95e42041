// A distributed world of one rank without MPI, for tests of the data-parallel plan where no
// launcher runs (the GPU machine has no mpirun): every collective of one rank is the identity,
// so a step under this world must give the bits of a step without one.
#pragma once
#include <cstdlib>
#include <memory>

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

}  // namespace trident::test_support
