// tests/emulator/test_decode_device.cpp: the DeviceDecoder (brrr/models/decode_device.h, chapter
// 20), generation's pass on the GPU, run by the emulator on small GPTs: its logits agree with the
// CPU Decoder's to float32 rounding and its greedy tokens are the same; its two promises hold (a
// sequence gets the same bits alone or beside others, and a prompt fed whole the bits of its
// tokens fed one at a time); sampled tokens, drawn on the device, are the CPU's from the same
// seed; bfloat16 weights stay near the CPU's bf16 path; bad calls are one-line
// errors that leave the sequences as they were. Transformers' greedy text through `brrr sample
// --device emulator` is checked in tests/models/test_hf.cpp. Read before: tests/models/test_decode.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "brrr/brrr.h"
#include "brrr/cuda.h"
#include "brrr/models/decode.h"
#include "brrr/models/decode_device.h"
#include "brrr/models/generate.h"
#include "tests/decode_models.h"
#include "tests/skip.h"

using namespace brrr;

namespace {

// The kernels inside are checked under every schedule by test_rows.cpp; these run on the first.
bool other_schedule() {
  const char* seed = std::getenv("BRRR_EMULATOR_SEED");
  return seed && std::string_view(seed) != "1";
}

std::unique_ptr<models::GPT> make_model(const models::GPTConfig& c, std::uint64_t seed) {
  return test::far_from_ties_model(c, seed);
}

models::GPTConfig shape(std::int64_t layers, std::int64_t heads, std::int64_t width, std::int64_t vocab, bool bias,
                        bool tied, const char* activation = "gelu_tanh") {
  return test::gpt_shape(layers, heads, width, vocab, bias, tied, activation, 24);
}

// Head sizes 16 and 10 (not a multiple of 4: the GEMV's one-at-a-time loads), an untied head,
// no biases, the exact GELU, odd vocabularies.
const models::GPTConfig kShapes[] = {shape(2, 2, 32, 65, true, true), shape(1, 3, 30, 43, false, false, "gelu_erf")};

std::vector<float> copy(const float* p, std::int64_t n) { return std::vector<float>(p, p + n); }

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
  return d;
}

// The same model on the CPU (cpu) and on the emulator's CUDA device (device).
struct Pair {
  std::unique_ptr<models::GPT> cpu, device;
  Pair(const models::GPTConfig& c, std::uint64_t seed) : cpu(make_model(c, seed)), device(make_model(c, seed)) {
    device->to(Device::cuda());
  }
};

}  // namespace

TEST_CASE("decode on the emulator: the DeviceDecoder's logits are the CPU Decoder's to float32 rounding, its greedy "
          "tokens the same") {
  if (other_schedule()) return test::skip("the DeviceDecoder runs on the first schedule");
  cuda::use_emulator();
  for (const models::GPTConfig& c : kShapes) {
    INFO("shape ", c.to_json());
    const Pair m(c, 3);
    models::Decoder cpu(*m.cpu);
    models::DeviceDecoder device(*m.device, 2);
    models::DecodeState a;
    models::DeviceDecodeState b = device.acquire();
    const std::vector<std::uint32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
    CHECK(max_difference(copy(cpu.prefill(a, prompt), c.vocab_size),
                         copy(device.prefill(b, prompt.data(), 8), c.vocab_size)) < 1e-4);
    for (std::uint32_t t : {7u, 0u, 42u}) {
      models::DeviceDecodeState* states[] = {&b};
      CHECK(max_difference(copy(cpu.step(a, t), c.vocab_size), copy(device.step(states, &t, 1), c.vocab_size)) < 1e-4);
    }
    CHECK(b.length == 11);
    // greedy(): the argmax of each row's logits, found on the device (a batch of 2 sequences).
    models::DeviceDecodeState b2 = device.acquire();
    device.prefill(b2, prompt.data(), 3);
    models::DeviceDecodeState* both[] = {&b, &b2};
    const std::uint32_t next[] = {5, 6};
    const std::int64_t ones[] = {1, 1}, rows[] = {0, 1};
    device.enqueue(both, ones, 2, next, rows, 2);
    const std::uint32_t* greedy = device.greedy();
    const std::vector<std::uint32_t> found(greedy, greedy + 2);
    const std::vector<float> logits = copy(device.logits(), 2 * c.vocab_size);
    for (std::int64_t r = 0; r < 2; ++r) {
      const float* row = logits.data() + r * c.vocab_size;
      CHECK(found[r] == std::max_element(row, row + c.vocab_size) - row);
    }
    device.release(b2);
    // generate() on a model on the CUDA device runs the DeviceDecoder: the CPU's greedy tokens,
    // to the end of the context and past it (the refill from the last half).
    models::GenerateOptions o;
    o.temperature = 0;
    o.max_new_tokens = c.block_size + 4;
    CHECK(models::generate(*m.device, prompt, o) == models::generate(*m.cpu, prompt, o));
    // Sampled, the draw made on the device (sample_rows): the CPU's tokens from the same seed.
    o.temperature = 0.9, o.top_k = 20, o.top_p = 0.9, o.seed = 11;
    CHECK(models::generate(*m.device, prompt, o) == models::generate(*m.cpu, prompt, o));
  }
}

TEST_CASE("decode on the emulator: a sequence's logits are the same bits alone, beside others, and prefilled whole "
          "or a token at a time") {
  if (other_schedule()) return test::skip("the DeviceDecoder runs on the first schedule");
  cuda::use_emulator();
  for (const DType weights : {kFloat32, kBFloat16}) {
    INFO("weights ", dtype_name(weights));
    const models::GPTConfig c = kShapes[0];
    const std::int64_t V = c.vocab_size;
    const Pair m(c, 5);
    models::DeviceDecoder decoder(*m.device, 3, weights);
    // A sequence fed one token at a time in a slot of its own: every position's logits.
    const auto one_at_a_time = [&](const std::vector<std::uint32_t>& tokens) {
      std::vector<std::vector<float>> logits;
      models::DeviceDecodeState s = decoder.acquire();
      for (std::uint32_t t : tokens) {
        models::DeviceDecodeState* states[] = {&s};
        logits.push_back(copy(decoder.step(states, &t, 1), V));
      }
      decoder.release(s);
      return logits;
    };
    const std::vector<std::uint32_t> a = {5, 6, 7, 8, 9, 10, 11};
    const std::vector<std::vector<float>> a_alone = one_at_a_time(a);
    // a prefilled whole, every row's logits wanted: the same bits row by row.
    {
      models::DeviceDecodeState s = decoder.acquire();
      models::DeviceDecodeState* states[] = {&s};
      const std::int64_t count = 7, wanted[] = {0, 1, 2, 3, 4, 5, 6};
      const float* whole = decoder.forward(states, &count, 1, a.data(), wanted, 7);
      for (std::int64_t r = 0; r < 7; ++r) {
        INFO("row ", r);
        CHECK(std::memcmp(whole + r * V, a_alone[r].data(), V * sizeof(float)) == 0);
      }
      decoder.release(s);
    }
    // a's prompt beside another sequence's prompt and a third's decoding step, in one pass, in
    // other slots than a had alone.
    models::DeviceDecodeState s1 = decoder.acquire(), s2 = decoder.acquire(), s3 = decoder.acquire();
    decoder.prefill(s3, std::vector<std::uint32_t>{1, 2}.data(), 2);
    models::DeviceDecodeState* states[] = {&s2, &s1, &s3};
    const std::vector<std::uint32_t> tokens = {20, 21, 22, 5, 6, 7, 8, 9, 10, 11, 30};
    const std::int64_t counts[] = {3, 7, 1}, wanted[] = {2, 9, 10};
    const float* logits = decoder.forward(states, counts, 3, tokens.data(), wanted, 3);
    CHECK(std::memcmp(logits + V, a_alone[6].data(), V * sizeof(float)) == 0);
    CHECK((s1.length == 7 && s2.length == 3 && s3.length == 3));
    for (models::DeviceDecodeState* s : {&s1, &s2, &s3}) decoder.release(*s);
    // A prefill of more rows than a decoding batch (3 x 23 = 69 > 64: linear_rows' tiles, not
    // its GEMV): each sequence's rows are still the bits of its tokens decoded one at a time.
    // On bf16 weights only (CI's minutes): test_rows.cpp holds the tiles to the GEMV's bits on
    // both kinds of weights.
    if (weights != kBFloat16) continue;
    std::vector<std::uint32_t> b(23);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint32_t>((7 * i + 3) % V);
    const std::vector<std::vector<float>> b_alone = one_at_a_time(b);
    models::DeviceDecodeState p[3] = {decoder.acquire(), decoder.acquire(), decoder.acquire()};
    models::DeviceDecodeState* three[] = {&p[0], &p[1], &p[2]};
    std::vector<std::uint32_t> b3;
    for (int i = 0; i < 3; ++i) b3.insert(b3.end(), b.begin(), b.end());
    const std::int64_t each[] = {23, 23, 23};
    std::vector<std::int64_t> every(69);
    for (std::int64_t r = 0; r < 69; ++r) every[static_cast<std::size_t>(r)] = r;
    const float* all = decoder.forward(three, each, 3, b3.data(), every.data(), 69);
    for (std::int64_t r = 0; r < 69; ++r) {
      INFO("prefill of 69 rows, row ", r);
      CHECK(std::memcmp(all + r * V, b_alone[static_cast<std::size_t>(r % 23)].data(), V * sizeof(float)) == 0);
    }
    for (models::DeviceDecodeState& s : p) decoder.release(s);
  }
}

TEST_CASE("decode on the emulator: a decoding step replayed as a CUDA graph per batch size gives the launched step's "
          "bits, with no device allocation") {
  if (other_schedule()) return test::skip("the DeviceDecoder runs on the first schedule");
  cuda::use_emulator();
  const models::GPTConfig c = kShapes[0];
  const std::int64_t V = c.vocab_size;
  const Pair m(c, 4);
  models::DeviceDecoder graphs(*m.device, 2), launches(*m.device, 2);
  launches.set_cuda_graphs(false);
  graphs.reserve_rows(8), launches.reserve_rows(8);
  models::DeviceDecodeState g[] = {graphs.acquire(), graphs.acquire()}, l[] = {launches.acquire(), launches.acquire()};
  const std::vector<std::uint32_t> prompt = {4, 4, 2};
  for (int i = 0; i < 2; ++i) graphs.prefill(g[i], prompt.data(), 3), launches.prefill(l[i], prompt.data(), 3);
  std::size_t allocations = 0;
  for (int step = 0; step < 6; ++step) {
    // Batch 1, then batch 2, alternately: each size launched once, captured, then replayed.
    const std::int64_t n = 1 + step % 2;
    const std::uint32_t tokens[] = {static_cast<std::uint32_t>(10 + step), static_cast<std::uint32_t>(30 - step)};
    models::DeviceDecodeState* gs[] = {&g[0], &g[1]};
    models::DeviceDecodeState* ls[] = {&l[0], &l[1]};
    const std::vector<float> replayed = copy(graphs.step(gs, tokens, n), n * V);
    INFO("step ", step, ", batch ", n);
    CHECK(std::memcmp(replayed.data(), launches.step(ls, tokens, n), replayed.size() * sizeof(float)) == 0);
    if (step == 3) allocations = cuda::memory_stats().device_allocations;
  }
  CHECK(graphs.cuda_graphs() == 2);
  CHECK(launches.cuda_graphs() == 0);
  CHECK(cuda::memory_stats().device_allocations == allocations);  // the replays allocate nothing
  CHECK((g[0].length == 9 && g[1].length == 6));
}

TEST_CASE("decode on the emulator: bfloat16 weights stay near the CPU Decoder's bfloat16 path") {
  if (other_schedule()) return test::skip("the DeviceDecoder runs on the first schedule");
  cuda::use_emulator();
  const models::GPTConfig c = kShapes[0];
  const Pair m(c, 9);
  models::Decoder cpu(*m.cpu, kBFloat16);
  models::DeviceDecoder device(*m.device, 1, kBFloat16);
  models::DecodeState a;
  models::DeviceDecodeState b = device.acquire();
  const std::vector<std::uint32_t> prompt = {8, 6, 7, 5, 3, 0, 9};
  // Both round x and the weights to bf16 and sum in float32, in other orders: the logits agree
  // to float32 rounding of sums of bf16 products, not to bf16's 2^-9.
  CHECK(max_difference(copy(cpu.prefill(a, prompt), c.vocab_size),
                       copy(device.prefill(b, prompt.data(), 7), c.vocab_size)) < 1e-4);
}

TEST_CASE("decode on the emulator: bad calls are one-line errors and leave the sequences as they were") {
  if (other_schedule()) return test::skip("the DeviceDecoder runs on the first schedule");
  cuda::use_emulator();
  const models::GPTConfig c = kShapes[1];
  const Pair m(c, 2);
  CHECK_THROWS_WITH_AS(models::DeviceDecoder(*m.cpu), doctest::Contains("must be a contiguous float32 tensor on the "
                                                                        "CUDA device, got float32 on cpu"), Error);
  models::DeviceDecoder decoder(*m.device, 2);
  models::DeviceDecodeState s = decoder.acquire(), t = decoder.acquire();
  CHECK_THROWS_WITH_AS(decoder.acquire(), "DeviceDecoder: all 2 slots of the cache hold a sequence", Error);
  const double rule[] = {0.8, 0.0, 1.0, 0.25};
  CHECK_THROWS_WITH_AS(decoder.sample(rule), "DeviceDecoder::sample: no pass has run", Error);
  const std::vector<std::uint32_t> prompt = {1, 2, 3};
  decoder.prefill(s, prompt.data(), 3);
  const std::uint32_t bad = static_cast<std::uint32_t>(c.vocab_size);
  models::DeviceDecodeState* both[] = {&s, &t};
  const std::uint32_t tokens[] = {4, bad};
  CHECK_THROWS_WITH_AS(decoder.step(both, tokens, 2), "Decoder: token 43 is outside the vocabulary (43)", Error);
  const std::vector<std::uint32_t> long_prompt(static_cast<std::size_t>(c.block_size), 1u);
  CHECK_THROWS_WITH_AS(decoder.prefill(s, long_prompt.data(), c.block_size),
                       "Decoder: 3 cached + 24 new positions exceed block_size 24", Error);
  CHECK((s.length == 3 && t.length == 0));
  const double bad_rule[] = {0.8, 2.5, 1.0, 0.25};
  CHECK_THROWS_WITH_AS(decoder.sample(bad_rule),
                       "DeviceDecoder::sample: row 0's rule needs temperature > 0, a whole top_k >= 0, top_p in (0, "
                       "1] and u in [0, 1); got 0.8, 2.5, 1, 0.25",
                       Error);
  // s was left as it was: its next token gives what it gives on a fresh sequence fed the same.
  const std::uint32_t four = 4;
  models::DeviceDecodeState* one[] = {&s};
  const std::vector<float> next = copy(decoder.step(one, &four, 1), c.vocab_size);
  decoder.release(t);
  models::DeviceDecodeState fresh = decoder.acquire();
  const std::vector<std::uint32_t> all = {1, 2, 3, 4};
  CHECK(std::memcmp(decoder.prefill(fresh, all.data(), 4), next.data(), next.size() * sizeof(float)) == 0);
  decoder.release(fresh);
  CHECK_THROWS_WITH_AS(decoder.release(fresh), "DeviceDecoder::release: slot -1 is not one this decoder handed out",
                       Error);
}
