// exercises/grader.cpp: the exercise table and the graders (docs/teaching.md).
// Read before: grader.h, exercises/student/student.h.
//
// A grader checks one variant of an exercise, "student" or "solution", and says why it
// failed in the words a learner needs next: which case, which element, the two values. It
// compares with something brrr already trusts: finite differences (brrr::gradcheck), the
// naive kernel, the real BPE trainer.
//
// Kernel exercises (chapters 12-16) plug in the same way. A stub in exercises/student/NAME.cu
// registers as variant "student" of its op in register_student_cuda_kernels()
// (exercises/student/student_cuda.cu), its solution as "solution" in
// exercises/solutions/; the table entry below names the op, and its grader is
// grade_kernel(op, variant, kernel_device()): the kernel lab (lab/kernel_lab.h) checks the
// variant against the CPU reference on the GPU, or on the SIMT emulator when there is none,
// and times it beside the default variant, at a small ragged size (a few seconds on the
// emulator). An entry whose stub does not exist yet is "coming" (grade is null).
#include "exercises/grader.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <random>
#include <sstream>

#include "brrr/strings.h"
#include "brrr/brrr.h"
#include "brrr/tokenizer/bpe.h"
#include "lab/kernel_lab.h"
#include "kernels/cuda/runtime.h"
#include "kernels/registry.h"
#include "exercises/student/student.h"
#if BRRR_EXERCISE_SOLUTIONS
#include "exercises/solutions/solutions.h"
#endif

namespace brrr::exercises {
namespace {

// The stream every brrr kernel and copy on the CUDA device runs on (the GPU's or the emulator's).
kernels::Stream device_stream() {
  gpu::Runtime* runtime = cuda::is_emulated() ? &gpu::emulator_runtime() : gpu::cuda_runtime();
  BRRR_CHECK(runtime != nullptr, "exercises: no CUDA device (a GPU or the emulator)");
  return runtime->stream();
}

// A failed check: thrown inside a grader, turned into a Failing result by grade().
struct Failure {
  std::string message;
};

Result result(Status status, std::string message) {
  Result r;
  r.status = status;
  r.message = std::move(message);
  return r;
}

template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream m;
  (m << ... << args);
  throw Failure{m.str()};
}

// A kernel exercise grades any registered variant of its op (the registry names the ones there
// are when it has no such variant); the function exercises know only these two.
void check_variant(const Exercise& exercise, const std::string& variant) {
  BRRR_CHECK(variant == "student" || variant == "solution" || !exercise.op.empty(), "exercises: unknown variant '",
             variant, "' (variants: student, solution)");
  BRRR_CHECK(variant != "solution" || solutions_built(),
             "exercises: this build has no reference solutions (exercises/solutions is not there)");
}

// Runs a grader: a Failure is a failing Result, a stub's "not written yet" naming exercise `id`
// a not-started one, any other error a failing one with its message.
Result guarded(const std::string& id, const std::function<Result()>& grader) {
  try {
    return grader();
  } catch (const Failure& f) {
    return result(Status::Failing, f.message);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const bool stub = what.find(student::kNotWritten) != std::string::npos && what.find(id) != std::string::npos;
    return result(stub ? Status::NotStarted : Status::Failing, what);
  } catch (...) {
    return result(Status::Failing, "threw something that is not a std::exception");
  }
}

// Runs f with `variant` of op selected on `device` (the CPU unless told), then puts back the
// selection that was there before (every dtype's the op has), even if f throws.
void with_kernel_variant(const std::string& op, const std::string& variant, const std::function<void()>& f,
                         DeviceType device = DeviceType::CPU) {
  bool has64 = false;  // matmul_bf16 has float32 kernels only
  for (const kernels::VariantInfo& v : kernels::variants(op)) has64 |= v.device.type == device && v.dtype == kFloat64;
  const std::string before32 = kernels::selected(op, device, kFloat32);
  const std::string before64 = has64 ? kernels::selected(op, device, kFloat64) : before32;
  struct Restore {
    const std::string &op, &v32, &v64;
    DeviceType device;
    ~Restore() {
      kernels::select(op, v64, device);
      kernels::select(op, v32, device);  // after: float32-only variants such as "blocked"
    }
  } restore{op, before32, before64, device};
  kernels::select(op, variant, device);
  f();
}

// The median of `runs` timings of f, in seconds, after one warm-up call.
double median_seconds(const std::function<void()>& f, int runs = 5) {
  f();
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// ---------------------------------------------------------------------------------------------
// ex01: the backward of div, by finite differences

Result check_div_backward(DivFn div) {
  Generator gen(2024);
  // b stays in [0.5, 1.5), away from 0, where a / b and its derivatives blow up.
  auto away_from_zero = [&](Shape shape) { return ops::add(rand(shape, gen, kFloat64), 0.5); };
  struct Case {
    Shape a, b;
    bool grad_a, grad_b;
  };
  const std::vector<Case> cases = {
      {{3, 4}, {3, 4}, true, true},  {{2, 3}, {2, 1}, true, true}, {{2, 3}, {3}, true, true},
      {{4}, {2, 1, 4}, true, true},  {{3, 4}, {3, 4}, true, false}, {{3, 4}, {4}, false, true},
  };
  for (const Case& c : cases) {
    Tensor a = randn(c.a, gen, kFloat64), b = away_from_zero(c.b);
    a.requires_grad_(c.grad_a);
    b.requires_grad_(c.grad_b);
    std::ostringstream name;
    name << "student::div(a " << shape_str(c.a) << (c.grad_a ? "" : " (no grad)") << ", b " << shape_str(c.b)
         << (c.grad_b ? "" : " (no grad)") << ")";
    const Tensor expected = ops::div(a.detach(), b.detach());
    GradcheckResult r;
    try {
      const Tensor got = div(a, b);
      if (got.shape() != expected.shape() || ops::max(ops::sub(got, expected).pow(2.0)).item() > 0)
        fail(name.str(), ": the forward changed; only div_backward is yours to write");
      r = gradcheck([&](const std::vector<Tensor>& x) { return div(x[0], x[1]); }, {a, b});
    } catch (const Error& e) {  // e.g. a gradient of the wrong shape: say which case
      const std::string what = e.what();
      if (what.find(student::kNotWritten) != std::string::npos) throw;
      // The usual slip: b was broadcast, and its gradient kept the output's shape.
      const bool shape = what.find("a gradient of shape") != std::string::npos;
      fail(name.str(), ": ", what,
           shape ? " (an input that was broadcast gets its gradient summed back to its own shape: autograd::sum_to)"
                 : "");
    }
    if (!r.ok) fail(name.str(), ": gradient differs from finite differences at ", r.message);
  }
  return result(Status::Passing, "6 cases, broadcast included, agree with finite differences");
}

// ---------------------------------------------------------------------------------------------
// ex02: a tiled CPU matmul, against the naive kernel

template <class T>
void check_matmul_cases(const std::string& variant) {
  using Fn = kernels::matmul_fn<T>;
  Fn got_fn = nullptr, ref_fn = nullptr;
  with_kernel_variant("matmul", variant, [&] {
    got_fn = kernels::lookup(kernels::op::matmul<T>, DeviceType::CPU);
  });
  with_kernel_variant("matmul", "naive", [&] {
    ref_fn = kernels::lookup(kernels::op::matmul<T>, DeviceType::CPU);
  });
  struct Case {
    std::int64_t batch, M, N, K;
    bool trans_a, trans_b, accumulate, broadcast_b;
  };
  const std::vector<Case> cases = {
      {1, 1, 1, 1, false, false, false, false},     {1, 7, 5, 3, false, false, false, false},
      {1, 65, 130, 300, false, false, false, false}, {1, 33, 70, 129, true, false, false, false},
      {1, 70, 33, 257, false, true, false, false},  {1, 64, 64, 64, true, true, false, false},
      {1, 20, 30, 40, false, false, true, false},   {3, 17, 9, 11, false, false, false, false},
      {2, 9, 70, 5, false, true, true, true},       {1, 5, 6, 0, false, false, false, false},
      {1, 0, 6, 3, false, false, false, false},
  };
  Generator gen(7);
  for (const Case& c : cases) {
    kernels::MatmulShape s;
    s.batch = c.batch, s.M = c.M, s.N = c.N, s.K = c.K;
    s.trans_a = c.trans_a, s.trans_b = c.trans_b, s.accumulate = c.accumulate;
    s.stride_a = c.M * c.K, s.stride_b = c.broadcast_b ? 0 : c.K * c.N, s.stride_out = c.M * c.N;
    const Tensor a = randn({c.batch, c.M * c.K}, gen, dtype_of<T>());
    const Tensor b = randn({c.broadcast_b ? 1 : c.batch, c.K * c.N}, gen, dtype_of<T>());
    const Tensor init = randn({c.batch, c.M * c.N}, gen, dtype_of<T>());
    Tensor ref = init.clone(), got = init.clone();
    ref_fn(ref.data_ptr<T>(), a.data_ptr<T>(), b.data_ptr<T>(), s, nullptr);
    got_fn(got.data_ptr<T>(), a.data_ptr<T>(), b.data_ptr<T>(), s, nullptr);
    const std::vector<T> r = ref.to_vector<T>(), g = got.to_vector<T>();
    const double tolerance = (sizeof(T) == 4 ? 1e-5 : 1e-12) * std::sqrt(static_cast<double>(std::max<std::int64_t>(c.K, 1)));
    for (std::size_t i = 0; i < r.size(); ++i) {
      const double err = std::abs(static_cast<double>(r[i]) - static_cast<double>(g[i]));
      if (!(err <= tolerance))
        fail(dtype_name(dtype_of<T>()), " batch ", c.batch, ", M ", c.M, ", N ", c.N, ", K ", c.K,
             c.trans_a ? ", trans_a" : "", c.trans_b ? ", trans_b" : "", c.accumulate ? ", accumulate" : "",
             c.broadcast_b ? ", b broadcast (stride 0)" : "", ": out[", i / (c.M * c.N), "][", (i % (c.M * c.N)) / c.N,
             "][", i % c.N, "] is ", g[i], ", naive gives ", r[i]);
    }
  }
}

Result grade_matmul_tiled(const std::string& variant) {
  check_matmul_cases<float>(variant);
  check_matmul_cases<double>(variant);
  // The same bits for 1 and 2 threads, and the registered variant inside ops::matmul.
  Generator gen(3);
  const Tensor a = randn({150, 270}, gen), b = randn({270, 130}, gen);
  const int threads = get_num_threads();
  std::vector<float> one, two;
  with_kernel_variant("matmul", variant, [&] {
    set_num_threads(1);
    one = ops::matmul(a, b).to_vector<float>();
    set_num_threads(2);
    two = ops::matmul(a, b).to_vector<float>();
  });
  set_num_threads(threads);
  if (one != two) fail("ops::matmul (150, 270) @ (270, 130): 1 and 2 threads give different bits");

  // Time against the default variant on one square problem.
  Result r = result(Status::Passing, "11 cases x float32, float64 agree with naive; same bits for 1 and 2 threads");
  r.reference_variant = kernels::selected("matmul", DeviceType::CPU, kFloat32);
  const Tensor x = randn({384, 384}, gen), w = randn({384, 384}, gen);
  with_kernel_variant("matmul", variant, [&] { r.seconds = median_seconds([&] { ops::matmul(x, w); }); });
  r.reference_seconds = median_seconds([&] { ops::matmul(x, w); });
  return r;
}

// ---------------------------------------------------------------------------------------------
// ex12: im2col, inside conv2d_forward variant "student" (exercises/student/im2col.cpp)

// The kernel lab checks the convolution against its definition in float32 at a ragged size
// (groups 2, stride 2, padding 3 > the kernel's half-width); then ops::conv2d in float64,
// with options that differ along H and W (which the lab's square options cannot tell apart),
// against the "direct" reference.
Result grade_im2col(const std::string& variant) {
  Result r = grade_kernel("conv2d_forward", variant, lab::LabDevice::CPU, {3, 4, 9, 7, 6, 3, 2, 3, 1, 2});
  Generator gen(12);
  const Tensor x = randn({2, 3, 11, 8}, gen, kFloat64), w = randn({4, 3, 3, 2}, gen, kFloat64);
  const Tensor b = randn({4}, gen, kFloat64);
  const ops::Size2 stride{2, 1}, padding{1, 3}, dilation{1, 2};
  Tensor got, ref;
  with_kernel_variant("conv2d_forward", variant, [&] { got = ops::conv2d(x, w, b, stride, padding, dilation); });
  with_kernel_variant("conv2d_forward", "direct", [&] { ref = ops::conv2d(x, w, b, stride, padding, dilation); });
  const std::vector<double> g = got.to_vector<double>(), e = ref.to_vector<double>();
  for (std::size_t i = 0; i < e.size(); ++i)
    if (!(std::abs(g[i] - e[i]) <= 1e-9 * std::max(1.0, std::abs(e[i]))))
      fail("conv2d (2, 3, 11, 8) * (4, 3, 3, 2), stride (2, 1), padding (1, 3), dilation (1, 2): out[", i,
           "] is ", g[i], ", the definition gives ", e[i], " (an option of H used for W, or the other way round?)");
  r.message += "; and with stride, padding and dilation that differ along H and W";
  return r;
}

// ---------------------------------------------------------------------------------------------
// ex13: rounding float32 to bfloat16, then inside matmul_bf16 variant "student"

std::string hex_bits(std::uint32_t bits, int digits) {
  std::ostringstream m;
  m << "0x" << std::hex << std::uppercase << std::setw(digits) << std::setfill('0') << bits;
  return m.str();
}

bool is_bf16_nan(std::uint16_t bits) { return (bits & 0x7FFFu) > 0x7F80u; }

// Every high half (all 65,536: every exponent, both signs, infinities, NaNs, subnormals)
// with the low halves where rounding decides: exact, just above, just below a half, a tie,
// just above a tie, the most; and two more drawn at random. brrr::bf16 (base/include/brrr/
// bfloat16.h, checked against CUDA's own conversion) is the answer; a NaN may be any NaN.
void check_bf16_bits(Bf16RoundFn rounding) {
  std::mt19937 gen(13);
  for (std::uint32_t high = 0; high <= 0xFFFFu; ++high) {
    const std::uint32_t lows[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF,
                                  std::uint32_t(gen() & 0xFFFFu), std::uint32_t(gen() & 0xFFFFu)};
    for (const std::uint32_t low : lows) {
      const std::uint32_t bits = high << 16 | low;
      const float x = std::bit_cast<float>(bits);
      const std::uint16_t got = rounding(x), want = bf16::round_bits(x);
      if (std::isnan(x) ? is_bf16_nan(got) : got == want) continue;
      std::ostringstream m;
      m << "float_to_bf16(" << x << " = " << hex_bits(bits, 8) << ") gives " << hex_bits(got, 4) << " ("
        << to_float(bf16::from_bits(got)) << "), ";
      if (std::isnan(x)) {
        m << "not a NaN: a NaN must stay a NaN, even one whose payload is only in the low 16 bits";
      } else {
        m << "the nearest bfloat16 is " << hex_bits(want, 4) << " (" << to_float(bf16::from_bits(want)) << ")";
        if (low == 0x8000) m << ": x is exactly halfway, and a tie goes to the value whose last bit is 0";
        else if (got + 1 == want) m << ": the low half " << hex_bits(low, 4) << " is over halfway, so round up";
        else if (got == want + 1) m << ": the low half " << hex_bits(low, 4) << " is under halfway, so round down";
      }
      fail(m.str());
    }
  }
}

// Under autocast, ops::matmul with `variant` of matmul_bf16 against float64 sums of the
// bf16-rounded operands (a batch of 3, ragged sizes, b transposed).
void check_matmul_bf16(const std::string& variant) {
  Generator gen(13);
  const Tensor a = randn({3, 37, 53}, gen), b = randn({29, 53}, gen);
  Tensor got;
  with_kernel_variant("matmul_bf16", variant, [&] {
    Autocast bf16_scope(kBFloat16);
    got = ops::matmul(a, b.transpose(0, 1));
  });
  const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), out = got.to_vector<float>();
  for (std::int64_t i = 0; i < 3 * 37; ++i)
    for (std::int64_t j = 0; j < 29; ++j) {
      double want = 0, scale = 0;
      for (std::int64_t k = 0; k < 53; ++k) {
        const double p = double(round_to_bf16(av[i * 53 + k])) * round_to_bf16(bv[j * 53 + k]);
        want += p, scale += std::abs(p);
      }
      const double g = out[i * 29 + j];
      if (!(std::abs(g - want) <= 1e-5 * std::max(1.0, scale)))
        fail("under Autocast(kBFloat16), matmul (3, 37, 53) @ (53, 29) with matmul_bf16 variant \"", variant,
             "\": out[", i / 37, "][", i % 37, "][", j, "] is ", g, ", float64 sums of the bf16 operands give ", want);
    }
}

Result check_bf16_round(Bf16RoundFn rounding, const std::string& variant) {
  check_bf16_bits(rounding);
  std::string message = "all 65,536 high halves x 8 low halves (ties, NaNs, infinities, subnormals) round as "
                        "CUDA's __float2bfloat16_rn";
  if (!variant.empty()) {
    check_matmul_bf16(variant);
    message += "; matmul_bf16 variant \"" + variant + "\" under autocast agrees with float64 sums";
  }
  return result(Status::Passing, message);
}

// ---------------------------------------------------------------------------------------------
// ex03: BPE merge steps, against the real trainer

// The text the merges are learned from: the start of tinyshakespeare when it is beside the
// checkout, else a few sentences (the check is the same either way: yours against the trainer's).
std::string bpe_text() {
  const char* dirs[] = {std::getenv("BRRR_SHARED_DIR"), BRRR_SHARED_DIR};
  for (const char* dir : dirs) {
    if (!dir) continue;
    std::ifstream f(std::filesystem::path(dir) / "data" / "tinyshakespeare.txt", std::ios::binary);
    if (!f) continue;
    std::string text(60000, '\0');
    f.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(f.gcount()));
    if (!text.empty()) return text;
  }
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "The tokenizer counts every pair of tokens in every word, merges the most frequent pair into a "
            "new token, and counts again. Ties go to the smaller pair, so the same text always gives the "
            "same merges. aaa aaaa abab baba " + std::to_string(i * 37) + "\n";
  return text;
}

Result check_bpe_merge(MostFrequentPairFn most_frequent_pair, MergePairFn merge_pair) {
  using Word = std::vector<std::uint32_t>;
  auto show = [](const Word& w) {
    std::string s = "{";
    for (std::size_t i = 0; i < w.size(); ++i) s += (i ? ", " : "") + std::to_string(w[i]);
    return s + "}";
  };
  // merge_pair on the cases that catch the usual slips.
  struct MergeCase {
    Word word;
    std::uint32_t a, b;
    Word expected;
  };
  const std::uint32_t id = 300;
  const std::vector<MergeCase> merges = {
      {{97, 97, 97}, 97, 97, {id, 97}},         {{97, 98, 97, 98}, 97, 98, {id, id}},
      {{98, 97}, 97, 98, {98, 97}},             {{}, 97, 98, {}},
      {{97}, 97, 98, {97}},                     {{99, 97, 98, 97, 98, 98}, 97, 98, {99, id, id, 98}},
  };
  for (const MergeCase& c : merges) {
    Word w = c.word;
    merge_pair(w, c.a, c.b, id);
    if (w != c.expected)
      fail("merge_pair(", show(c.word), ", ", c.a, ", ", c.b, ", ", id, ") gave ", show(w), ", expected ",
           show(c.expected));
  }
  // most_frequent_pair: weights, ties, nothing to merge.
  struct PairCase {
    std::vector<Word> words;
    std::vector<std::uint64_t> counts;
    std::pair<std::uint32_t, std::uint32_t> expected;
  };
  const std::uint32_t none = student::kNoPair;
  const std::vector<PairCase> pairs = {
      {{{1, 2}, {3, 4}}, {1, 1}, {1, 2}},
      {{{3, 4}, {1, 2}}, {1, 1}, {1, 2}},
      {{{1, 2}, {5, 6}}, {1, 3}, {5, 6}},
      {{{7, 7, 7}, {1, 2}}, {1, 1}, {7, 7}},
      {{{2, 1}, {1, 3}}, {2, 2}, {1, 3}},
      {{{1}, {}}, {5, 5}, {none, none}},
  };
  for (const PairCase& c : pairs) {
    const auto got = most_frequent_pair(c.words, c.counts);
    if (got != c.expected) {
      std::string words;
      for (std::size_t w = 0; w < c.words.size(); ++w)
        words += (w ? ", " : "") + show(c.words[w]) + " x" + std::to_string(c.counts[w]);
      fail("most_frequent_pair(", words, ") gave (", got.first, ", ", got.second, "), expected (", c.expected.first,
           ", ", c.expected.second, ")");
    }
  }

  // The whole training run, step by step, against Bpe::train_words.
  using namespace brrr::tokenizer;
  const std::string text = bpe_text();
  const SplitPattern pattern{std::string(kGpt2Pattern)};
  const WordCounts counts = count_words(text, pattern, {}, 1);
  TrainOptions options;
  options.vocab_size = 256 + 300;
  options.special_tokens = {};
  options.threads = 1;
  TrainStats stats;
  Bpe::train_words(counts, options, &stats);

  std::vector<Word> words;  // every word starts as its bytes: token b is byte b
  for (const std::string& w : counts.words) {
    words.emplace_back();
    for (char c : w) words.back().push_back(static_cast<unsigned char>(c));
  }
  std::vector<std::string> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  std::size_t made = 0, step = 0;
  while (made < 300) {
    const auto [a, b] = most_frequent_pair(words, counts.counts);
    if (a == none) break;
    if (step >= stats.history.size())
      fail("merge ", step, ": you merged (", a, ", ", b, ") but the trainer had stopped: no pair is left to merge");
    const MergeRecord& want = stats.history[step];
    if (a != want.left || b != want.right)
      fail("merge ", step, ": you merged (", a, ", ", b, "), the trainer (", want.left, ", ", want.right, ") seen ",
           want.count, " times");
    // The new token, or the one that already has these bytes (an "alias" merge, bpe.h).
    const std::string merged = bytes[a] + bytes[b];
    std::uint32_t token = static_cast<std::uint32_t>(std::find(bytes.begin(), bytes.end(), merged) - bytes.begin());
    if (token == bytes.size()) {
      bytes.push_back(merged);
      ++made;
    }
    if (token != want.id) fail("merge ", step, ": (", a, ", ", b, ") became token ", token, ", the trainer's ", want.id);
    for (Word& w : words) merge_pair(w, a, b, token);
    ++step;
  }
  if (step != stats.history.size())
    fail("after ", step, " merges you found no pair left, but the trainer made ", stats.history.size());
  std::ostringstream m;
  m << step << " merges on " << text.size() << " bytes of text match Bpe::train_words";
  return result(Status::Passing, m.str());
}

// The table's graders of ex01 and ex03: the student's functions, or the solution's.
Result grade_div_backward_variant(const std::string& variant) {
#if BRRR_EXERCISE_SOLUTIONS
  if (variant == "solution") return check_div_backward(&solution::div);
#endif
  return check_div_backward(&student::div);
}

Result grade_bf16_round_variant(const std::string& variant) {
#if BRRR_EXERCISE_SOLUTIONS
  if (variant == "solution") return check_bf16_round(&solution::float_to_bf16, variant);
#endif
  return check_bf16_round(&student::float_to_bf16, variant);
}

Result grade_bpe_merge_variant(const std::string& variant) {
#if BRRR_EXERCISE_SOLUTIONS
  if (variant == "solution") return check_bpe_merge(&solution::most_frequent_pair, &solution::merge_pair);
#endif
  return check_bpe_merge(&student::most_frequent_pair, &student::merge_pair);
}

}  // namespace

Result grade_div_backward(DivFn div) {
  return guarded("ex01", [&] { return check_div_backward(div); });
}

Result grade_bpe_merge(MostFrequentPairFn most_frequent_pair, MergePairFn merge_pair) {
  return guarded("ex03", [&] { return check_bpe_merge(most_frequent_pair, merge_pair); });
}

Result grade_bf16_round(Bf16RoundFn rounding) {
  return guarded("ex13", [&] { return check_bf16_round(rounding, ""); });
}

// ---------------------------------------------------------------------------------------------
// Kernel exercises, through the kernel lab

lab::LabDevice kernel_device() { return cuda::gpu_available() ? lab::LabDevice::CUDA : lab::LabDevice::Emulator; }

Result grade_kernel(const std::string& op, const std::string& variant, lab::LabDevice device,
                    const std::vector<std::int64_t>& size) {
  install();
  const lab::Case& c = lab::find_case(op);
  lab::Options o;
  o.device = device;
  o.variant = variant;
  o.size = size;
  o.out = nullptr;
  const lab::Report report = lab::run(c, o);
  BRRR_CHECK(report.note.empty(), "exercises: ", report.note);
  const lab::VariantResult& r = report.results.at(0);
  if (!r.passed) {
    // A stub's own words ("exercise exNN (...): not written yet") make it "not started".
    if (r.failure.find(student::kNotWritten) != std::string::npos) throw Error(r.failure);
    fail(op, " variant '", variant, "' on ", report.device, " at ", report.size, ": ", r.failure);
  }
  std::ostringstream m;
  m << "agrees with the CPU reference on " << report.device << " at " << report.size << " (max relative error "
    << r.max_rel_error << ")";
  Result graded = result(Status::Passing, m.str());
  graded.seconds = r.median_ms / 1e3;
  // The default variant, timed the same way.
  o.variant = kernels::selected(op, device == lab::LabDevice::CPU ? DeviceType::CPU : DeviceType::CUDA, kFloat32);
  o.mode = lab::Mode::Perf;
  const lab::Report reference = lab::run(c, o);
  graded.reference_variant = o.variant;
  graded.reference_seconds = reference.results.at(0).median_ms / 1e3;
  return graded;
}

namespace {

// ---------------------------------------------------------------------------------------------
// ex04-ex11: the CUDA kernel exercises (exercises/student/*.cu). Each is checked by the kernel
// lab against the CPU kernel at a size that is not a multiple of any block or tile (the
// element counts are odd, the rows not a multiple of 32), small enough for the emulator.

Result grade_gelu_forward(const std::string& variant) {
  return grade_kernel("gelu_forward", variant, kernel_device(), {5003});
}
Result grade_gelu_backward(const std::string& variant) {
  return grade_kernel("gelu_backward", variant, kernel_device(), {5003});
}
Result grade_layernorm_forward(const std::string& variant) {
  return grade_kernel("layernorm_forward", variant, kernel_device(), {13, 301});
}
Result grade_layernorm_backward(const std::string& variant) {
  return grade_kernel("layernorm_backward", variant, kernel_device(), {13, 301});
}
Result grade_flash_attention_forward(const std::string& variant) {
  return grade_kernel("attention_forward", variant, kernel_device(), {3, 45, 24});  // BH, T, hs
}
Result grade_cross_entropy_fused(const std::string& variant) {
  return grade_kernel("cross_entropy_fused", variant, kernel_device(), {21, 517});  // N, V; row 5 ignored
}
Result grade_adamw_step(const std::string& variant) {
  return grade_kernel("adamw_step", variant, kernel_device(), {5003});
}

// ex08: the lab checks the plain product (M, N, K) = (37, 29, 45); the model also uses the
// transposes, batches (a stride of 0 broadcasts), accumulate and K == 0, so those are checked
// here on the device against the CPU's naive kernel.
Result grade_matmul_shared(const std::string& variant) {
  Result graded = grade_kernel("matmul", variant, kernel_device(), {37, 29, 45});
  const DeviceType cuda = DeviceType::CUDA;
  kernels::matmul_fn<float> fn = nullptr;
  with_kernel_variant("matmul", variant, [&] { fn = kernels::lookup(kernels::op::matmul<float>, cuda); }, cuda);
  kernels::matmul_fn<double> naive = nullptr;
  with_kernel_variant("matmul", "naive", [&] {
    naive = kernels::lookup(kernels::op::matmul<double>, DeviceType::CPU);
  });
  struct Case {
    std::int64_t batch, M, N, K;
    bool trans_a, trans_b, accumulate, broadcast_b;
  };
  const std::vector<Case> cases = {
      {1, 19, 23, 33, true, false, false, false}, {1, 23, 19, 17, false, true, false, false},
      {1, 17, 18, 20, true, true, false, false},  {1, 20, 21, 19, false, false, true, false},
      {3, 9, 17, 11, false, false, false, false}, {2, 9, 20, 5, false, true, true, true},
      {1, 5, 6, 0, false, false, false, false},   {2, 5, 6, 0, false, false, true, false},
  };
  Generator gen(11);
  for (const Case& c : cases) {
    kernels::MatmulShape s;
    s.batch = c.batch, s.M = c.M, s.N = c.N, s.K = c.K;
    s.trans_a = c.trans_a, s.trans_b = c.trans_b, s.accumulate = c.accumulate;
    s.stride_a = c.M * c.K, s.stride_b = c.broadcast_b ? 0 : c.K * c.N, s.stride_out = c.M * c.N;
    // (random draws of no elements: zeros of that shape)
    auto draw = [&](std::int64_t rows, std::int64_t cols) {
      return rows * cols == 0 ? zeros({rows, cols}, kFloat64) : randn({rows, cols}, gen, kFloat64);
    };
    const Tensor a = draw(c.batch, c.M * c.K), b = draw(c.broadcast_b ? 1 : c.batch, c.K * c.N);
    const Tensor init = draw(c.batch, c.M * c.N);
    Tensor ref = init.clone();
    naive(ref.data_ptr<double>(), a.data_ptr<double>(), b.data_ptr<double>(), s, nullptr);
    const Device device = Device::cuda();
    const Tensor a_dev = a.to(kFloat32).to(device), b_dev = b.to(kFloat32).to(device);
    Tensor got = init.to(kFloat32).to(device);
    // On brrr's stream, where the copies before and after it run. (Stream 0, the legacy default
    // stream, is not ordered with brrr's non-blocking stream: on a GPU the copy back could read
    // `got` before the kernel finished. The emulator refuses such a launch.)
    fn(got.data_ptr<float>(), a_dev.data_ptr<float>(), b_dev.data_ptr<float>(), s, device_stream());
    const std::vector<float> g = got.to(kCPU).to_vector<float>();
    const std::vector<double> r = ref.to_vector<double>();
    const double tolerance = 1e-5 * std::sqrt(static_cast<double>(std::max<std::int64_t>(c.K, 1)));
    for (std::size_t i = 0; i < r.size(); ++i)
      if (!(std::abs(static_cast<double>(g[i]) - r[i]) <= tolerance * std::max(1.0, std::abs(r[i]))))
        fail("matmul variant '", variant, "': batch ", c.batch, ", M ", c.M, ", N ", c.N, ", K ", c.K,
             c.trans_a ? ", trans_a" : "", c.trans_b ? ", trans_b" : "", c.accumulate ? ", accumulate" : "",
             c.broadcast_b ? ", b broadcast (stride 0)" : "", ": out[", i / (c.M * c.N), "][", (i % (c.M * c.N)) / c.N,
             "][", i % c.N, "] is ", g[i], ", the naive kernel gives ", r[i]);
  }
  graded.message += "; 8 cases of transposes, batch strides (0 included), accumulate and K = 0 agree with naive";
  return graded;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The table

const char* status_name(Status status) {
  switch (status) {
    case Status::NotStarted: return "not started";
    case Status::Failing: return "failing";
    case Status::Passing: return "passing";
    case Status::Coming: return "coming";
  }
  return "?";
}

const std::vector<Exercise>& all() {
  static const std::vector<Exercise> table = {
      {"ex01", "div_backward", 3, "cpu", "exercises/student/div_backward.cpp",
       "the backward of a / b, broadcasting included", "", &grade_div_backward_variant},
      {"ex02", "matmul_tiled", 4, "cpu", "exercises/student/matmul_tiled.cpp",
       "a cache-tiled CPU matmul, registered as matmul variant \"student\"", "matmul", &grade_matmul_tiled},
      {"ex03", "bpe_merge", 6, "cpu", "exercises/student/bpe_merge.cpp",
       "one BPE merge step: the most frequent pair, and merging it", "", &grade_bpe_merge_variant},
      // Kernel exercises (exercises/student/*.cu), graded on the GPU, or the emulator without one.
      {"ex04", "gelu_forward", 12, "cuda", "exercises/student/gelu.cu", "GELU forward kernel", "gelu_forward",
       &grade_gelu_forward},
      {"ex05", "gelu_backward", 12, "cuda", "exercises/student/gelu.cu", "GELU backward kernel", "gelu_backward",
       &grade_gelu_backward},
      {"ex06", "layernorm_forward", 13, "cuda", "exercises/student/layernorm.cu", "LayerNorm forward kernel",
       "layernorm_forward", &grade_layernorm_forward},
      {"ex07", "layernorm_backward", 13, "cuda", "exercises/student/layernorm.cu", "LayerNorm backward kernel",
       "layernorm_backward", &grade_layernorm_backward},
      {"ex08", "matmul_shared", 14, "cuda", "exercises/student/matmul.cu", "a tiled matmul in shared memory",
       "matmul", &grade_matmul_shared},
      {"ex09", "flash_attention_forward", 15, "cuda", "exercises/student/attention.cu",
       "flash attention forward (online softmax)", "attention_forward", &grade_flash_attention_forward},
      {"ex10", "cross_entropy_fused", 16, "cuda", "exercises/student/crossentropy.cu",
       "softmax + cross-entropy forward and gradient in one pass", "cross_entropy_fused", &grade_cross_entropy_fused},
      {"ex11", "adamw_step", 16, "cuda", "exercises/student/adamw.cu", "the AdamW update", "adamw_step",
       &grade_adamw_step},
      {"ex12", "im2col", 9, "cpu", "exercises/student/im2col.cpp",
       "im2col, inside conv2d_forward variant \"student\"", "conv2d_forward", &grade_im2col},
      {"ex13", "bf16_round", 18, "cpu", "exercises/student/bf16_round.cpp",
       "float32 to bfloat16, round to nearest even, inside matmul_bf16 variant \"student\"", "",
       &grade_bf16_round_variant},
  };
  return table;
}

const Exercise& find(const std::string& id_or_name) {
  std::vector<std::string> ids;
  for (const Exercise& e : all()) {
    if (e.id == id_or_name || e.name == id_or_name) return e;
    ids.push_back(e.id + " " + e.name);
  }
  detail::fail("exercises: no exercise '", id_or_name, "' (exercises: ", join(ids), ")");
}

Result grade(const Exercise& exercise, const std::string& variant) {
  install();  // the variants it grades are the exercises' own
  if (!exercise.grade) return result(Status::Coming, "coming with chapter " + std::to_string(exercise.chapter));
  return guarded(exercise.id, [&] {
    check_variant(exercise, variant);
    return exercise.grade(variant);
  });
}

bool solutions_built() {
#if BRRR_EXERCISE_SOLUTIONS
  return true;
#else
  return false;
#endif
}

}  // namespace brrr::exercises
