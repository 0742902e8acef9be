// kernels/cuda/cublaslt.cu: matmul_epilogue on bf16 data through cuBLASLt, the default on a GPU:
// the bf16 step's linear layers as llm.c runs them, one GEMM whose epilogue adds the bias,
// applies GELU (writing the pre-activation the backward needs) and rounds to bf16 from the
// accumulators, so the (M, N) result is written once, in bf16. GPU only (host code: the
// emulator has no cuBLAS; it runs matmul/epilogue.cu's variant).
// Chapter 18, section 11. Read before: kernels/cuda/cublas.cu (the row-major to column-major
// rule), kernels/cuda/matmul/epilogue.cu (the same op in two passes).
//
// cuBLASLt is cuBLAS with the GEMM's description in objects: a matmul descriptor (compute
// type, transposes, epilogue and its pointers), a layout per matrix, and an algorithm chosen by
// its heuristic for that description. The description and the chosen algorithm depend only on
// the shape (and the pointers' alignment), so they are made once per shape and kept: a step runs
// the same dozen shapes every time, and would otherwise ask the heuristic again at every call.
// The bias and pre pointers change per call and are set on the kept descriptor before each GEMM.
//
// As in cublas.cu, the row-major out (M, N) = a @ b is the column-major out^T (N, M) = b^T a^T:
// cuBLASLt's A is brrr's b, its B is brrr's a, its D has N rows. The bias is then one value per
// row of D (what CUBLASLT_EPILOGUE_BIAS adds), and pre (N rows, leading dimension N) is the GELU
// input matrix, whose leading dimension cuBLASLt wants a multiple of 8.
//
// GELU: the epilogue must apply brrr's GELU, the tanh form (GPT-2's). tests/cuda/test_gpu.cpp
// checks it on a GPU: at K = 1 the outputs must be bf16(gelu_tanh(x)), which the erf form's
// roundings are not (tests/linear_gelu_check.h); the lab table there checks every shape. Not yet
// run: no GPU has been lent since this file was written.
//
// Where cuBLASLt cannot take the call (a pointer not 16-byte aligned, N not a multiple of 8 with
// pre, or no algorithm from the heuristic) the call goes to the two-pass variant instead, and
// `brrr kernels` says so in this variant's line.
#include <cstdint>
#include <cublasLt.h>
#include <map>
#include <mutex>
#include <tuple>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/matmul/matmul.h"
#include "kernels/matmul_epilogue.h"
#include "kernels/registry.h"

namespace brrr::kernels::cuda {
namespace {

// One handle and one workspace for the process, made on the first call (before a CUDA graph
// captures a step: the trainer runs its first step plainly), so no GEMM asks the driver for
// memory while a step is captured. 32 MiB, as cublas.cu gives cuBLAS.
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

struct Lt {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};
const Lt& lt() {
  static const Lt made = [] {
    Lt l;
    BRRR_CUBLAS_CHECK(cublasLtCreate(&l.handle));
    BRRR_CUDA_CHECK(cudaMalloc(&l.workspace, kWorkspaceBytes));
    return l;
  }();
  return made;
}

// What a plan depends on: the shape, the epilogue and the pointers' alignment (the heuristic
// picks algorithms for the alignment it is told).
using PlanKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, bool, bool, bool, bool, bool, int>;

struct Plan {
  bool usable = false;  // false: cuBLASLt offered no algorithm; the call takes the two-pass variant
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// The largest power of two (at most 256) that divides every given address.
int alignment_of(std::initializer_list<const void*> pointers) {
  int align = 256;
  for (const void* p : pointers)
    if (p)
      while (align > 1 && reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(align) != 0) align /= 2;
  return align;
}

cublasLtMatrixLayout_t layout(std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  BRRR_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, static_cast<std::uint64_t>(rows),
                                               static_cast<std::uint64_t>(cols), ld));
  return l;
}

template <class T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t what, const T& value) {
  BRRR_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, what, &value, sizeof(value)));
}

cublasLtEpilogue_t epilogue_of(bool bias, bool gelu, bool pre) {
  if (!gelu) return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (pre) return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
}

// The descriptor, the three layouts (C is D: beta is 0) and the heuristic's first algorithm for
// one shape and epilogue, the bias and pre pointers set as this call's (their alignment counts).
Plan make_plan(const MatmulShape& s, const void* bias, void* pre, bool gelu, int align) {
  Plan p;
  BRRR_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // cuBLASLt's A is b: b is (K, N) row-major, the column-major (N, K); transposed, (K, N).
  const cublasOperation_t op_a = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
  set(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
  p.a = s.trans_b ? layout(s.K, s.N, s.K) : layout(s.N, s.K, s.N);
  p.b = s.trans_a ? layout(s.M, s.K, s.M) : layout(s.K, s.M, s.K);
  p.d = layout(s.N, s.M, s.N);
  set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue_of(bias != nullptr, gelu, pre != nullptr));
  if (bias) set(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);  // bf16, D's type: the default
  if (gelu && pre) {
    set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, pre);
    set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<std::int64_t>(s.N));
  }
  cublasLtMatmulPreference_t pref = nullptr;
  BRRR_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const std::uint64_t workspace = kWorkspaceBytes;
  const std::uint32_t min_align = static_cast<std::uint32_t>(align);
  BRRR_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                         sizeof(workspace)));
  for (auto which : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                     CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    BRRR_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, which, &min_align, sizeof(min_align)));
  cublasLtMatmulHeuristicResult_t found{};
  int count = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt().handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &found, &count);
  BRRR_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  p.usable = status == CUBLAS_STATUS_SUCCESS && count > 0 && found.state == CUBLAS_STATUS_SUCCESS;
  if (p.usable) p.algo = found.algo;
  return p;
}

void matmul_epilogue_cublaslt(brrr::bf16* out, brrr::bf16* pre, const brrr::bf16* a, const brrr::bf16* b,
                              const brrr::bf16* bias, bool gelu, const MatmulShape& s, Stream stream) {
  check_matmul_epilogue("matmul_epilogue cublaslt", s, out, a, b);
  if (s.M == 0 || s.N == 0) return;
  const int align = alignment_of({out, pre, a, b, bias});
  // cuBLASLt's shapes are 32-bit; its GELU input wants a leading dimension that is a multiple of 8.
  const bool fits = s.K > 0 && s.M <= INT32_MAX && s.N <= INT32_MAX && s.K <= INT32_MAX && align >= 16 &&
                    !(gelu && pre && s.N % 8 != 0);
  static std::mutex mutex;
  static std::map<PlanKey, Plan> plans;
  std::unique_lock<std::mutex> lock(mutex);
  Plan* plan = nullptr;
  if (fits) {
    const PlanKey key{s.M, s.N, s.K, s.trans_a, s.trans_b, bias != nullptr, gelu, gelu && pre != nullptr, align};
    auto it = plans.find(key);
    if (it == plans.end()) it = plans.emplace(key, make_plan(s, bias, gelu ? pre : nullptr, gelu, align)).first;
    plan = &it->second;
  }
  if (plan == nullptr || !plan->usable) {
    lock.unlock();
    return matmul_epilogue_unfused(out, pre, a, b, bias, gelu, s, stream);
  }
  if (bias) set(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
  if (gelu && pre) set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<void*>(pre));
  const float alpha = 1.0f, beta = 0.0f;
  const Lt& l = lt();
  BRRR_CUBLAS_CHECK(cublasLtMatmul(l.handle, plan->desc, &alpha, b, plan->a, a, plan->b, &beta, out, plan->d, out,
                                   plan->d, &plan->algo, l.workspace, kWorkspaceBytes,
                                   static_cast<cudaStream_t>(stream)));
}

}  // namespace

void register_cublaslt_kernels() {
  add(op::matmul_epilogue_on_bf16, DeviceType::CUDA, "cublaslt", &matmul_epilogue_cublaslt, 100,
      about("cuBLASLt's bf16 GEMM with bias, GELU (pre kept) and the rounding in its epilogue; "
            "unaligned or unplannable calls take the two-pass variant"));
}

}  // namespace brrr::kernels::cuda
