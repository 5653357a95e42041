// The host copies of a cuda executable's tensors (Executable::host_view, what a batch is written
// into before upload) are page-locked, so an upload is one DMA at the bus's speed rather than a
// copy through the driver's staging buffer; and they move the same bytes as before: a batch
// uploaded and read back is unchanged. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#ifdef TRIDENT_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <cstring>

#include "core/random.h"
#include "frontend/zoo.h"
#include "runtime/executable.h"
#include "support/gpu_compare.h"

namespace trident {
namespace {

TEST(CudaHostCopies, AreLockedPagesThatRoundTripABatch) {
  TRIDENT_REQUIRE_GPU();
  passes::CompileOptions o = runtime::default_compile_options(passes::Mode::Train);
  o.backend = "cuda";
  auto exe = runtime::Executable::compile(frontend::build_model("fmnist_cnn", {.batch = 8}), o, BackendOptions{});
  const int images = exe->value_id("images");
  TensorView h = exe->host_view(images);
  ASSERT_EQ(exe->host_view(images).data, h.data) << "a value has one host copy";
#ifdef TRIDENT_HAVE_CUDA
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, h.data), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost) << "the host copy is pageable memory";
#endif
  Rng rng(2);
  std::vector<float> batch(static_cast<size_t>(h.numel()));
  for (float& v : batch) v = static_cast<float>(rng.uniform(-1, 1));
  std::memcpy(h.data, batch.data(), h.bytes());
  exe->upload(images);
  std::memset(h.data, 0, h.bytes());
  exe->download(images);
  EXPECT_EQ(std::memcmp(h.data, batch.data(), h.bytes()), 0);
}

}  // namespace
}  // namespace trident
