// NCCL loaded at run time and the communicator of a distributed world (nccl_communicator.h).
// Only the handful of entry points trident calls are resolved; nccl.h gives their types.
#include "backends/cuda/nccl_communicator.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>

#include "core/error.h"
#include "core/world.h"

namespace trident::cuda {

namespace {

struct NcclApi {
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*comm_destroy)(ncclComm_t) = nullptr;
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t) = nullptr;
  ncclResult_t (*group_start)() = nullptr;
  ncclResult_t (*group_end)() = nullptr;
  const char* (*get_error_string)(ncclResult_t) = nullptr;
  ncclResult_t (*get_version)(int*) = nullptr;
};

template <class F>
void resolve(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) throw Error(std::string("the NCCL library lacks ") + name + ": it is older than the 2.10 trident needs");
}

const NcclApi& nccl_api() {
  static std::mutex mu;
  static std::unique_ptr<NcclApi> api;
  std::lock_guard<std::mutex> lock(mu);
  if (api) return *api;
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  if (!lib)
    throw Error(std::string("data-parallel training on the GPU needs NCCL, and libnccl.so.2 could not be loaded (") +
                dlerror() +
                "): install it (NVIDIA's libnccl2 package, or PyPI's nvidia-nccl-cu13) and put its folder on "
                "LD_LIBRARY_PATH");
  auto made = std::make_unique<NcclApi>();
  resolve(lib, "ncclGetUniqueId", made->get_unique_id);
  resolve(lib, "ncclCommInitRank", made->comm_init_rank);
  resolve(lib, "ncclCommDestroy", made->comm_destroy);
  resolve(lib, "ncclAllReduce", made->all_reduce);
  resolve(lib, "ncclGroupStart", made->group_start);
  resolve(lib, "ncclGroupEnd", made->group_end);
  resolve(lib, "ncclGetErrorString", made->get_error_string);
  resolve(lib, "ncclGetVersion", made->get_version);
  api = std::move(made);
  return *api;  // the library stays loaded for the life of the process
}

void check(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess)
    throw Error("NCCL failed " + what + ": " + nccl_api().get_error_string(r));
}

}  // namespace

NcclCommunicator::NcclCommunicator(distributed::World& world, int device) : size_(world.size()) {
  const NcclApi& api = nccl_api();
  ncclUniqueId id{};
  if (world.rank() == 0) check(api.get_unique_id(&id), "making the communicator's unique id");
  world.broadcast(&id, sizeof id, 0);
  if (cudaSetDevice(device) != cudaSuccess) throw Error("NCCL: cannot select GPU " + std::to_string(device));
  check(api.comm_init_rank(&comm_, world.size(), id, world.rank()),
        "joining the communicator of " + std::to_string(world.size()) + " ranks (" + distributed::rank_text(world) + ")");
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) nccl_api().comm_destroy(comm_);  // failures at tear-down are ignored
}

namespace {

// One all-reduce per span — `reduce(api, span)` enqueues it — inside one group of calls.
template <class Span, class Reduce>
void in_one_group(const std::vector<Span>& spans, Reduce reduce) {
  const NcclApi& api = nccl_api();
  check(api.group_start(), "starting a group of all-reduces");
  for (const Span& s : spans) check(reduce(api, s), "enqueuing an all-reduce");
  check(api.group_end(), "ending a group of all-reduces");
}

}  // namespace

void NcclCommunicator::average(const std::vector<std::pair<float*, size_t>>& spans, cudaStream_t stream) const {
  in_one_group(spans, [&](const NcclApi& api, const std::pair<float*, size_t>& s) {
    return api.all_reduce(s.first, s.first, s.second, ncclFloat32, ncclAvg, comm_, stream);
  });
}

void NcclCommunicator::sum(const std::vector<SumSpan>& spans, cudaStream_t stream) const {
  in_one_group(spans, [&](const NcclApi& api, const SumSpan& s) {
    return api.all_reduce(s.in, s.out, s.count, s.type, ncclSum, comm_, stream);
  });
}

std::string NcclCommunicator::version() {
  int v = 0;
  check(nccl_api().get_version(&v), "reporting its version");
  // NCCL ≥ 2.9 codes versions as major·10000 + minor·100 + patch.
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::shared_ptr<NcclCommunicator> nccl_communicator(distributed::World& world, int device) {
  static std::mutex mu;
  static std::map<std::pair<const distributed::World*, int>, std::weak_ptr<NcclCommunicator>> made;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = made[{&world, device}];
  if (auto c = slot.lock()) return c;
  auto c = std::make_shared<NcclCommunicator>(world, device);
  slot = c;
  return c;
}

}  // namespace trident::cuda
