// fold_batchnorm on the GPU: the inference weights w·γ/√(σ²+ε) per output channel and the
// folded bias (b − μ)·γ/√(σ²+ε) + β, in f64 per element, one grid-stride pass over the larger
// of the two. Runs once per weight update (the executable hoists it), so it stays simple.
#include "backends/cuda/device/batchnorm_detail.cuh"

namespace trident::cuda::device {

using namespace batchnorm_detail;

namespace {

template <class T>
__global__ void fold_kernel(FoldBatchNormArgs a) {
  const int64_t weights = a.K * a.per_k, total = weights > a.K ? weights : a.K;
  for (int64_t i = grid_start(); i < total; i += grid_stride()) {
    if (i < weights) {
      const int64_t k = i / a.per_k;
      const double scale = static_cast<double>(load(a.gamma, k)) / sqrt(static_cast<double>(load(a.var, k)) + a.eps);
      static_cast<T*>(a.w_folded)[i] =
          from_float<T>(static_cast<float>(static_cast<double>(to_float(static_cast<const T*>(a.w)[i])) * scale));
    }
    if (i < a.K) {
      const double scale = static_cast<double>(load(a.gamma, i)) / sqrt(static_cast<double>(load(a.var, i)) + a.eps);
      const double b = a.bias.data ? static_cast<double>(load(a.bias, i)) : 0.0;
      store(a.b_folded, i, (b - load(a.mean, i)) * scale + load(a.beta, i));
    }
  }
}

}  // namespace

void launch_fold_batchnorm(const FoldBatchNormArgs& args, cudaStream_t stream) {
  const int64_t total = std::max(args.K * args.per_k, args.K);
  if (total <= 0) return;
  dispatch_elem(args.w_type, [&](auto tag) {
    using T = decltype(tag);
    fold_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(args);
  });
  check_launch("fold_batchnorm fold_kernel");
}

}  // namespace trident::cuda::device
