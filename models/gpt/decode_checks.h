// models/gpt/decode_checks.h: what a pass of either Decoder accepts (brrr/models/decode.h on the
// CPU, decode_device.h on the GPU), checked before any cache is touched, so that a bad request
// leaves every sequence as it was (brrr serve keeps serving). Chapters 08 and 20.
// Read before: brrr/models/decode.h. Read next: models/gpt/decode.cpp, decode_device.cpp.
#pragma once
#include <cstdint>
#include <string>

#include "brrr/error.h"
#include "brrr/models/gpt.h"

namespace brrr::models::detail {

// n sequences (states), sequence i holding held(*states[i]) positions and taking counts[i] of
// the R tokens; the W rows wanted index into them, ascending. Returns R.
template <class State, class Held>
std::int64_t check_pass(const GPTConfig& c, State* const* states, Held held, const std::int64_t* counts, std::int64_t n,
                        const std::uint32_t* tokens, const std::int64_t* wanted, std::int64_t W) {
  BRRR_CHECK(n >= 1, "Decoder: no sequences");
  std::int64_t R = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    BRRR_CHECK(counts[i] >= 1, "Decoder: sequence ", i, " has no tokens");
    const std::int64_t t = held(*states[i]);
    BRRR_CHECK(t + counts[i] <= c.block_size, "Decoder: ", n > 1 ? "sequence " + std::to_string(i) + ": " : "", t,
               " cached + ", counts[i], " new positions exceed block_size ", c.block_size);
    for (std::int64_t j = 0; j < i; ++j)
      BRRR_CHECK(states[j] != states[i], "Decoder: sequence ", i, " is also sequence ", j);
    R += counts[i];
  }
  for (std::int64_t r = 0; r < R; ++r)
    BRRR_CHECK(tokens[r] < c.vocab_size, "Decoder: token ", tokens[r], " is outside the vocabulary (", c.vocab_size,
               ")");
  BRRR_CHECK(W >= 1 && W <= R, "Decoder: ", W, " rows of logits asked for, of ", R);
  for (std::int64_t w = 0; w < W; ++w)
    BRRR_CHECK(wanted[w] >= 0 && wanted[w] < R && (w == 0 || wanted[w] > wanted[w - 1]),
               "Decoder: the rows of logits must ascend within 0 .. ", R - 1);
  return R;
}

}  // namespace brrr::models::detail
