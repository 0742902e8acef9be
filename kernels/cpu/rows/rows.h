// kernels/cpu/rows/rows.h: the row kernels, the CPU kernels of fast generation and serving
// (chapter 08, "Why decoding is memory-bound"; chapter 20): a linear layer over a few rows that
// reads each weight once, in float32 or bfloat16, and the LayerNorm, GELU and attention of a
// few rows, shared over one thread team. Named for what they work on (rows), not for their
// first user: the Decoder (models/gpt/decode.cpp) calls them for brrr sample and for brrr serve's
// batched steps, directly, not through the registry: they work on raw buffers that the Decoder
// owns, with no Tensor or shape work per token. The family: team.cpp (the threads), rows.cpp
// (the dot-product tiles of a few rows, LayerNorm, attention), gemm.cpp (the GEMM tiles of many
// rows), bf16.cpp (bf16 weights, x rounded to bf16: --dtype bf16), amx.cpp (the same on AMX's
// tile unit), internal.h (what they share).
// Read before: cpu.h. Read next: team.cpp, rows.cpp.
//
// The order of additions (float32 weights; bf16 weights have their own, below): every output of
// linear_rows is one dot product over k computed the
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

// y (M, N) = x (M, K) @ W^T (+ bias), W (N, K) float32 row-major (a Linear's weight), x and y
// with row strides K and N.
void linear_rows(float* y, const float* x, const float* w, const float* bias, std::int64_t M, std::int64_t N,
                 std::int64_t K, Epilogue epilogue);

// --- bfloat16 weights (--dtype bf16; bf16.cpp), as autocast means it -------------------------
// x is rounded to bf16 at the input (to nearest, ties to even; float32 subnormals as 0), each
// product is of two bf16 (exact in float32), and each output is ONE float32 sum over k's pairs
// in increasing order: s = 0; for each pair i: s += x[2i+1] w[2i+1], then s += x[2i] w[2i],
// each addition rounded to float32 (one FMA), a subnormal result flushed to 0 (as AVX512_BF16's
// VDPBF16PS does; subnormal weights are stored as 0); then the bias, then the epilogue. K is
// padded with zeros to bf16_panel_k(K). Nothing in it depends on M, the thread count, or the path
// (below), so a row's bits are the same alone, batched, prefilled or stepped.
//
// W is held as "pair panels": outputs 16 at a time, and for each pair i of k the 16 outputs'
// pairs side by side (64 bytes), zeros past N and K: panels[((p * Kp / 2) + i) * 32 + 2 j + q] =
// W[16 p + j][2 i + q], Kp = bf16_panel_k(K). A vector of W is then 16 outputs' pair i, what
// VDPBF16PS multiplies by x's pair broadcast, and a run of 16 pairs is a tile of AMX's second
// operand (amx.cpp). The Decoder packs its weights once (models/gpt/decode.cpp).
constexpr std::int64_t bf16_panel_k(std::int64_t K) { return (K + 31) / 32 * 32; }
std::int64_t bf16_panels_size(std::int64_t N, std::int64_t K);  // in bf16 numbers
// w (N, K) row-major into panels (room for bf16_panels_size(N, K)): float32 rounded to nearest,
// ties to even (bf16::round_bits), or bf16 bits as they are.
void pack_bf16_panels(std::uint16_t* panels, const float* w, std::int64_t N, std::int64_t K);
void pack_bf16_panels(std::uint16_t* panels, const std::uint16_t* w, std::int64_t N, std::int64_t K);
// y (M, N) = x (M, K) @ W^T (+ bias) in the order above, W as pair panels; on the tile unit
// instead while amx_enabled() (below).
void linear_rows_panels(float* y, const float* x, const std::uint16_t* panels, const float* bias, std::int64_t M,
                        std::int64_t N, std::int64_t K, Epilogue epilogue);
// The same with W (N, K) bf16 bits row-major, packed into panels on each call (tests, the lab).
void linear_rows(float* y, const float* x, const std::uint16_t* w, const float* bias, std::int64_t M, std::int64_t N,
                 std::int64_t K, Epilogue epilogue);

// How the order above is computed off the tile unit: VDPBF16PS (where the build has
// AVX512_BF16; else as kEmulated), AVX-512F FMAs with a flush after each (where the build has
// AVX-512F; else as kLoops), or plain loops, an output at a time. All three give the same bits
// (tests/core/test_decode_kernels.cpp); the switch is the whole process's, for tests and
// benchmarks.
enum class Bf16Path { kInstructions, kEmulated, kLoops };
Bf16Path bf16_path();
void set_bf16_path(Bf16Path path);

// bfloat16 weights on Intel's AMX tile unit (amx.cpp): the same pair panels and rounded x, but
// the unit sums each step's 32 products its own way, so not the order above; the same bits for a
// row whatever M and the thread count. amx_available: this CPU has the unit and the OS lets brrr
// use it. linear_rows_panels takes it while amx_enabled(): where available and the environment
// sets BRRR_AMX=1 (a run's bits would otherwise depend on the CPU); set_amx_enabled switches it
// for the whole process (tests and benchmarks compare the two paths). linear_rows_amx is that
// path alone (an error where the unit is not available).
bool amx_available();
bool amx_enabled();
void set_amx_enabled(bool on);
void linear_rows_amx(float* y, const float* x, const std::uint16_t* panels, const float* bias, std::int64_t M,
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
// linear_rows with bfloat16 weights (row-major, packed into panels on each call) for the
// registry: off the tile unit ("tiles", on bf16_path()), and on AMX's tile unit ("amx",
// registered where amx_available()), whatever the amx switch.
void linear_rows_bf16_op(float* y, const float* x, const bf16* w, const float* bias, std::int64_t M, std::int64_t N,
                         std::int64_t K, int epilogue, void* stream);
void linear_rows_bf16_amx_op(float* y, const float* x, const bf16* w, const float* bias, std::int64_t M,
                             std::int64_t N, std::int64_t K, int epilogue, void* stream);
void attend_rows_loop(double* out, const double* q, const double* k, const double* v, std::int64_t t0,
                      std::int64_t n, std::int64_t hs);

}  // namespace brrr::kernels::cpu
