// kernels/cpu/rows/rows.h: the row kernels, the CPU kernels of fast generation and serving
// (chapter 08, "Why decoding is memory-bound"; chapter 20): a linear layer over a few rows that
// reads each weight once, in float32 or bfloat16, and the LayerNorm, GELU and attention of a
// few rows, shared over one thread team. Named for what they work on (rows), not for their
// first user: the Decoder (models/gpt/decode.cpp) calls them for brrr sample and for brrr serve's
// batched steps, directly, not through the registry: they work on raw buffers that the Decoder
// owns, with no Tensor or shape work per token. The family: team.cpp (the threads), rows.cpp
// (the dot-product tiles of a few rows, LayerNorm, attention), gemm.cpp (the GEMM tiles of many
// rows), amx.cpp (bf16 weights on AMX's tile unit), internal.h (what they share).
// Read before: cpu.h. Read next: team.cpp, rows.cpp.
//
// The order of additions: every output of linear_rows is one dot product over k computed the
// same way whatever M, the thread count or the CPU's vector width: eight partial sums, lane l
// holding the products of k = l, l + 8, l + 16, ... below K - K % 8, each added with one fused
// multiply-add in increasing k; then the lanes summed as ((l0 + l4) + (l2 + l6)) + ((l1 + l5) +
// (l3 + l7)); then the last K % 8 products, in order; then the bias. So a sequence's numbers do
// not depend on which other rows ran beside it (batch invariance). Two kernels compute them:
// tiles of dot products for a few rows (decoding, a step of a few sequences), and from 48 rows
// (33 with AVX-512; a prefill) a GEMM's tile that runs the 8 lanes' chains one after another and adds them in
// the same order, so a row's bits never depend on which kernel ran it (rows.cpp, gemm.cpp).
#pragma once
#include <cstdint>
#include <functional>

#include "brrr/bfloat16.h"

namespace brrr::kernels::cpu {

// What linear_rows does to each output after the bias.
enum class Epilogue {
  kStore,     // y = x W^T + b
  kAdd,       // y += x W^T + b (a residual connection: y holds the residual)
  kGeluTanh,  // y = gelu_tanh(x W^T + b) (GPT-2's "gelu_new")
  kGeluErf,   // y = gelu_erf(x W^T + b), the exact x Phi(x) (Hugging Face's "gelu")
};

// y (M, N) = x (M, K) @ W^T (+ bias), W (N, K) row-major (a Linear's weight), x and y with row
// strides K and N. W is float32, or bfloat16 bits (the top half of a float32; widened exactly;
// on the tile unit instead while amx_enabled(), below).
void linear_rows(float* y, const float* x, const float* w, const float* bias, std::int64_t M, std::int64_t N,
                 std::int64_t K, Epilogue epilogue);
void linear_rows(float* y, const float* x, const std::uint16_t* w, const float* bias, std::int64_t M, std::int64_t N,
                 std::int64_t K, Epilogue epilogue);

// bfloat16 weights on Intel's AMX tile unit (amx.cpp): x split into two bf16 (hi + lo)
// whose products the unit sums; not the FMA sums' bits above, but the same bits for a row
// whatever M and the thread count. amx_available: this CPU has the unit and the OS lets brrr use
// it. linear_rows with bfloat16 weights takes it while amx_enabled(): where available and the
// environment sets BRRR_AMX=1 (it pays for batches of rows, not for decoding's one: see
// amx.cpp); set_amx_enabled switches it for the whole process (tests and benchmarks
// compare the two paths). linear_rows_amx is that path alone (an error where the unit is not
// available).
bool amx_available();
bool amx_enabled();
void set_amx_enabled(bool on);
void linear_rows_amx(float* y, const float* x, const std::uint16_t* w, const float* bias, std::int64_t M,
                     std::int64_t N, std::int64_t K, Epilogue epilogue);

// y (M, C) = LayerNorm of each row of x (M, C) (mean and variance in float64), then * w + b
// (b may be nullptr): cpu.h's layer_norm_row, the training forward's numbers.
void layer_norm_rows(float* y, const float* x, const float* w, const float* b, std::int64_t M, std::int64_t C,
                     float eps);

// body(begin, end) for consecutive blocks of `grain` indices of [0, n), shared among the
// threads the way the kernels here share theirs (team.cpp, "The team"): the calling thread
// never waits for a thread that has not started a block.
void rows_parallel(std::int64_t n, std::int64_t grain, const std::function<void(std::int64_t, std::int64_t)>& body);

// The largest of v[0 .. n) (-inf when n is 0). Max is exact, so 8 lanes at a time give what a
// loop in order gives (NaNs aside).
float row_max(const float* v, std::int64_t n);
// The total attend_row(s) divide a row's weights exp(s_p - max) by: lane l adds e[p] for p = l,
// l + 8, ... in order, the 8 lanes are added as the dot products add theirs, then e[p] for the
// last n % 8 positions in order. Whoever wants the weights attend_row used divides by this.
float softmax_total(const float* e, std::int64_t n);

// One query's attention over positions 0 .. t - 1 of one head: out (hs) = softmax(q . k_p /
// sqrt(hs)) weighted sum of v_p, where k_p = keys + p * stride (hs numbers; so does v_p).
// scores has room for t floats. The sums run over p in increasing order.
void attend_row(float* out, const float* q, const float* keys, const float* values, std::int64_t t,
                std::int64_t stride, std::int64_t hs, float* scores);

// The rows of one sequence that attend_rows takes at a time, in the Decoder and in the
// registry's attend_rows: a prefill's (group, head) pairs are the threads' units of work. Each
// group packs its keys into panels once (gemm.cpp's gemm_scores), so the fewer groups, the
// less packing: at 16 rows the packing was 40% of gemm_scores in GPT-2's 512-token prefill (perf,
// docs/measurements.md), at 64 a quarter of that, with still 96 units of work at 512 rows.
constexpr std::int64_t kAttendGroup = 64;

// The same for n consecutive rows of one sequence and head (a prefill): row i's query, at
// q + i * ldq, attends over positions 0 .. t0 + i; its output goes to out + i * ldo and its
// scores (room for t0 + n floats) to scores + i * lds. Each row's numbers are attend_row's,
// bit for bit: the scores are linear_rows's dot products (3 x 3 tiles of them below 6 rows, the
// GEMM tile from 6), times 1 / sqrt(hs).
void attend_rows(float* out, std::int64_t ldo, const float* q, std::int64_t ldq, const float* keys,
                 const float* values, std::int64_t t0, std::int64_t n, std::int64_t stride, std::int64_t hs,
                 float* scores, std::int64_t lds);

// The registry's linear_rows and attend_rows (kernels/signatures.h; chapter 11's kernel lab
// checks and times them): float32, the kernels above ("tiles"; attend_rows in groups of kAttendGroup
// rows, as the Decoder calls it); float64, plain loops ("loop"). The last argument is the op's
// stream, which the CPU ignores (linear_rows has CUDA kernels too: kernels/cuda/rows/).
void linear_rows_op(float* y, const float* x, const float* w, const float* bias, std::int64_t M, std::int64_t N,
                    std::int64_t K, int epilogue, void* stream);
void linear_rows_loop(double* y, const double* x, const double* w, const double* bias, std::int64_t M,
                      std::int64_t N, std::int64_t K, int epilogue, void* stream);
void attend_rows_op(float* out, const float* q, const float* k, const float* v, std::int64_t t0, std::int64_t n,
                    std::int64_t hs);
// linear_rows with bfloat16 weights for the registry: on the FMA tiles ("tiles", the default
// path), and on AMX's tile unit ("amx", registered where amx_available()), whatever the switch.
void linear_rows_bf16_op(float* y, const float* x, const bf16* w, const float* bias, std::int64_t M, std::int64_t N,
                         std::int64_t K, int epilogue, void* stream);
void linear_rows_bf16_amx_op(float* y, const float* x, const bf16* w, const float* bias, std::int64_t M,
                             std::int64_t N, std::int64_t K, int epilogue, void* stream);
void attend_rows_loop(double* out, const double* q, const double* k, const double* v, std::int64_t t0,
                      std::int64_t n, std::int64_t hs);

}  // namespace brrr::kernels::cpu
