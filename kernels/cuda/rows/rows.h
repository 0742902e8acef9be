// kernels/cuda/rows/rows.h: the row kernels on the GPU, the kernels of a decoding step (chapter
// 20, "Decoding on the GPU"): linear_rows, a Linear over one to a few rows that reads each weight
// once (a GEMV split over K; a prefill's many rows in tiles, summed in the GEMV's order), and attend_cache, one query per row against its sequence's KV
// cache (flash-decoding: the cache's positions split over blocks, then one combine), and
// sample_rows, a token drawn from each row's logits without sorting them. The GPU
// twins of kernels/cpu/rows/ (chapter 08), under the same ops (kernels/signatures.h).
// Read before: kernels/cpu/rows/rows.h, kernels/cuda/attention/attention.h (the training
// attention these are not). Read next: linear_rows.cu, then attend_cache.cu.
//
// Both keep the Decoder's promise of batch invariance: a row's numbers are summed in an order
// fixed by its own sizes (K for linear_rows; its own cache length for attend_cache), never by
// how many rows are in the call, so a sequence gets the same bits alone or in a batch. attend_cache
// also lets a prefill's rows share a slot at lengths t0 + 1 .. t0 + n, which gives each the bits
// of the same token decoded one at a time (prefill-equals-stepwise stays possible).
//
// Compiled twice (see simt.h): brrr::kernels::emu (the emulator) and brrr::kernels::cuda.
#pragma once

namespace brrr::kernels {

namespace emu {
void register_linear_rows_kernels();   // linear_rows.cu
void register_attend_cache_kernels();  // attend_cache.cu
void register_sample_kernels();        // sample.cu
}  // namespace emu

namespace cuda {
void register_linear_rows_kernels();
void register_attend_cache_kernels();
void register_sample_kernels();
}  // namespace cuda

}  // namespace brrr::kernels
