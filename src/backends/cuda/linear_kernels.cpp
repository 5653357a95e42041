// The cuda backend's linear family on cuBLASLt: linear (y = x·wᵀ + b, the bias as a matmul
// epilogue), linear_backward_data (dx = dy·w) and linear_backward_weight (dw = dyᵀ·x, db by a
// column-sum kernel). Row-major matrices are handed to cuBLASLt as their column-major
// transposes. Each kernel picks its algorithm once, when built; f32 runs on TF32 tensor cores,
// f16/bf16 accumulate in f32.
#include <cstdint>
#include <memory>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device/linear.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"

namespace trident::cuda {

namespace {

using device::ElemType;

constexpr size_t kMatmulWorkspace = size_t{32} << 20;  // what cuBLASLt suggests for Hopper
constexpr size_t kMinAlignment = 16;                     // bytes every bound tensor is assumed to start at

cudaDataType_t cuda_type(ElemType t) {
  switch (t) {
    case ElemType::f16: return CUDA_R_16F;
    case ElemType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// D[m×n] = op(A)·op(B) in column-major terms, with an optional bias (length m) epilogue.
struct MatmulSpec {
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  uint64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool bias = false;
};

// A cuBLASLt matmul: descriptors and the heuristic's algorithm, made once.
class LtMatmul {
 public:
  LtMatmul(const ir::Node& node, CudaContext& ctx, ElemType io, const MatmulSpec& spec) : ctx_(ctx), spec_(spec) {
    const cudaDataType_t type = cuda_type(io);
    const cublasComputeType_t compute = io == ElemType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const std::string what = "building the cuBLASLt matmul of node '" + node.name + "'";
    check(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F), what);
    check(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &spec.trans_a, sizeof spec.trans_a), what);
    check(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &spec.trans_b, sizeof spec.trans_b), what);
    if (spec.bias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      check(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue), what);
      check(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof type), what);
    }
    const bool a_n = spec.trans_a == CUBLAS_OP_N, b_n = spec.trans_b == CUBLAS_OP_N;
    check(cublasLtMatrixLayoutCreate(&a_, type, a_n ? spec.m : spec.k, a_n ? spec.k : spec.m, spec.lda), what);
    check(cublasLtMatrixLayoutCreate(&b_, type, b_n ? spec.k : spec.n, b_n ? spec.n : spec.k, spec.ldb), what);
    check(cublasLtMatrixLayoutCreate(&c_, type, spec.m, spec.n, spec.ldc), what);

    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), what);
    const uint64_t ws = kMatmulWorkspace;
    const uint32_t align = kMinAlignment;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof align);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(ctx.cublaslt(), desc_, a_, b_, c_, c_, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check(st, what);
    if (found < 1)
      fail(node, "cuBLASLt has no algorithm for this " + std::to_string(spec.m) + "×" + std::to_string(spec.n) + "×" +
                     std::to_string(spec.k) + " product; try f32 or sizes that are multiples of 8");
    algo_ = result.algo;
    ctx.reserve_workspace(0, kMatmulWorkspace);
  }

  ~LtMatmul() {
    if (c_) cublasLtMatrixLayoutDestroy(c_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
  }
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  void run(const ir::Node& node, const void* a, const void* b, void* c, const void* bias) {
    for (const void* p : {a, b, static_cast<const void*>(c), bias})
      if (reinterpret_cast<uintptr_t>(p) % kMinAlignment != 0)
        fail(node, "a tensor is not " + std::to_string(kMinAlignment) + "-byte aligned, which the cuBLASLt plan assumes");
    const std::string what = "the cuBLASLt matmul of node '" + node.name + "'";
    if (spec_.bias) check(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), what);
    const float alpha = 1.f, beta = 0.f;
    check(cublasLtMatmul(ctx_.cublaslt(), desc_, &alpha, a, a_, b, b_, &beta, c, c_, c, c_, &algo_, ctx_.workspace(0),
                         kMatmulWorkspace, ctx_.stream()),
          what);
  }

 private:
  CudaContext& ctx_;
  MatmulSpec spec_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

// Sizes of one linear layer: x [N,I], w [O,I], y [N,O].
struct LinearDims {
  int64_t N = 0, I = 0, O = 0;
  ElemType type = ElemType::f32;
};

LinearDims linear_dims(const ir::Node& node, const ir::Value& x, const ir::Value& w, const ir::Value& y) {
  for (const ir::Value* v : {&x, &w, &y})
    if (v->shape.size() != 2) fail(node, "'" + v->name + "' must be a matrix, got " + shape_str(v->shape));
  LinearDims d{x.shape[0], x.shape[1], w.shape[0], elem_of(node, x, "input")};
  if (w.shape[1] != d.I || y.shape[0] != d.N || y.shape[1] != d.O)
    fail(node, "shapes x" + shape_str(x.shape) + " w" + shape_str(w.shape) + " y" + shape_str(y.shape) + " do not agree");
  expect_dtype(node, w, x.dtype, "weight");
  expect_dtype(node, y, x.dtype, "output");
  if (d.N * d.I * d.O == 0) fail(node, "has an empty dimension (" + shape_str(x.shape) + " × " + shape_str(w.shape) + ")");
  return d;
}

// linear: yᵀ[O×N] = (w as col-major [I×O])ᵀ · (x as col-major [I×N]).
class Linear final : public Kernel {
 public:
  Linear(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : node_(node) {
    expect_arity(node, 2, 3, 1, 1);
    const LinearDims d = linear_dims(node, input_value(node, g, 0), input_value(node, g, 1), output_value(node, g, 0));
    has_bias_ = node.inputs.size() == 3;
    if (has_bias_) {
      expect_dtype(node, input_value(node, g, 2), input_value(node, g, 0).dtype, "bias");
      expect_shape(node, input_value(node, g, 2), Shape{d.O}, "bias");
    }
    MatmulSpec s;
    s.trans_a = CUBLAS_OP_T;
    s.m = d.O, s.n = d.N, s.k = d.I;
    s.lda = d.I, s.ldb = d.I, s.ldc = d.O;
    s.bias = has_bias_;
    matmul_ = std::make_unique<LtMatmul>(node, ctx, d.type, s);
  }

  void run(const KernelArgs& a) override {
    matmul_->run(node_, a.in[1].data, a.in[0].data, a.out[0].data, has_bias_ ? a.in[2].data : nullptr);
  }

 private:
  ir::Node node_;
  bool has_bias_ = false;
  std::unique_ptr<LtMatmul> matmul_;
};

// linear_backward_data: dxᵀ[I×N] = (w as col-major [I×O]) · (dy as col-major [O×N]).
class LinearBackwardData final : public Kernel {
 public:
  LinearBackwardData(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : node_(node) {
    expect_arity(node, 2, 2, 1, 1);
    const LinearDims d = linear_dims(node, output_value(node, g, 0), input_value(node, g, 1), input_value(node, g, 0));
    MatmulSpec s;
    s.m = d.I, s.n = d.N, s.k = d.O;
    s.lda = d.I, s.ldb = d.O, s.ldc = d.I;
    matmul_ = std::make_unique<LtMatmul>(node, ctx, d.type, s);
  }

  void run(const KernelArgs& a) override { matmul_->run(node_, a.in[1].data, a.in[0].data, a.out[0].data, nullptr); }

 private:
  ir::Node node_;
  std::unique_ptr<LtMatmul> matmul_;
};

// linear_backward_weight: dwᵀ[I×O] = (x as col-major [I×N]) · (dy as col-major [O×N])ᵀ;
// db = column sums of dy.
class LinearBackwardWeight final : public Kernel {
 public:
  LinearBackwardWeight(const ir::Node& node, const ir::Graph& g, CudaContext& ctx) : node_(node), ctx_(ctx) {
    expect_arity(node, 2, 2, 1, 2);
    dims_ = linear_dims(node, input_value(node, g, 0), output_value(node, g, 0), input_value(node, g, 1));
    has_bias_ = node.outputs.size() == 2;
    if (has_bias_ != (node.attrs.i("has_bias", has_bias_ ? 1 : 0) != 0))
      fail(node, "attribute has_bias disagrees with the number of outputs");
    if (has_bias_) {
      expect_dtype(node, output_value(node, g, 1), input_value(node, g, 0).dtype, "bias gradient");
      expect_shape(node, output_value(node, g, 1), Shape{dims_.O}, "bias gradient");
    }
    MatmulSpec s;
    s.trans_b = CUBLAS_OP_T;
    s.m = dims_.I, s.n = dims_.O, s.k = dims_.N;
    s.lda = dims_.I, s.ldb = dims_.O, s.ldc = dims_.I;
    matmul_ = std::make_unique<LtMatmul>(node, ctx, dims_.type, s);
  }

  void run(const KernelArgs& a) override {
    matmul_->run(node_, a.in[0].data, a.in[1].data, a.out[0].data, nullptr);
    if (has_bias_) device::launch_column_sums(dims_.type, a.in[1].data, dims_.N, dims_.O, a.out[1].data, ctx_.stream());
  }

 private:
  ir::Node node_;
  CudaContext& ctx_;
  LinearDims dims_;
  bool has_bias_ = false;
  std::unique_ptr<LtMatmul> matmul_;
};

}  // namespace

void register_linear_kernels() {
  add_kernel<Linear>("linear");
  add_kernel<LinearBackwardData>("linear_backward_data");
  add_kernel<LinearBackwardWeight>("linear_backward_weight");
}

}  // namespace trident::cuda
