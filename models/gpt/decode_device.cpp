// models/gpt/decode_device.cpp: the DeviceDecoder, GPT-2's forward pass for generation on the
// GPU (chapter 20). Read before: brrr/models/decode_device.h, models/gpt/decode.cpp (the same
// pass on the CPU), kernels/cuda/rows/rows.h. Read next: generate.cpp (which drives it).
//
// A pass over R rows, each a CUDA kernel from the registry (so a student's kernel, registered
// for the lab, runs here too):
//   x = wte[token] + wpe[position]             embedding_forward twice, add
//   per layer:  normed = ln_1(x)                layernorm_forward
//               qkv = normed W_attn^T + b        linear_rows (a GEMV split over K)
//               k, v into the cache              append_cache, at each row's length - 1
//               attended = attention             attend_cache (flash-decoding)
//               x += attended W_proj^T + b       linear_rows, epilogue "add"
//               x += gelu(ln_2(x) W_fc^T + b) W_proj2^T + b
//   logits = ln_f(x[wanted]) W_head^T           embedding_forward gathers the wanted rows
// The host uploads the pass's int32 indices once (tokens, positions, slots, lengths, wanted) and
// reads the logits back once: two copies a pass, whatever the model's depth.
#include "brrr/models/decode_device.h"

#include <algorithm>
#include <limits>

#include "brrr/error.h"
#include "kernels/backend.h"
#include "kernels/cuda/runtime.h"
#include "kernels/registry.h"
#include "kernels/sample_rule.h"
#include "models/gpt/decode_checks.h"

namespace brrr::models {

namespace op = brrr::kernels::op;
using i64 = std::int64_t;

namespace {

constexpr auto kCuda = DeviceType::CUDA;

// The epilogues of linear_rows (kernels/signatures.h).
enum Epilogue { kStore = 0, kAdd = 1, kGeluTanh = 2, kGeluErf = 3 };

float* floats(const Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

kernels::Stream stream() { return kernels::cuda_runtime()->stream(); }

// y (M, N) (+)= x (M, K) W^T + b, W float32 or bfloat16 (N, K), by linear_rows on the device.
void linear(float* y, const float* x, const void* w, DType dtype, const float* bias, i64 M, i64 N, i64 K, int e) {
  static kernels::Kernel f32(op::linear_rows<float>);
  static kernels::Kernel bf16w(op::linear_rows_on_bf16);
  if (dtype == kFloat32) f32(kCuda)(y, x, static_cast<const float*>(w), bias, M, N, K, e, stream());
  else bf16w(kCuda)(y, x, static_cast<const bf16*>(w), bias, M, N, K, e, stream());
}

void layer_norm(float* out, float* mean, float* rstd, const float* x, const float* w, const float* b, i64 N, i64 C,
                float eps) {
  static kernels::Kernel k(op::layernorm_forward<float>);
  k(kCuda)(out, mean, rstd, x, w, b, N, C, eps, stream());
}

// out (N, C) = table[idx[i]] for each of the N rows (the embedding's kernel, also the gather of
// the wanted rows of x).
void gather(float* out, const float* table, const std::int32_t* idx, i64 N, i64 C) {
  static kernels::Kernel k(op::embedding_forward<float>);
  k(kCuda)(out, table, idx, N, C, stream());
}

void add(float* out, const float* a, const float* b, i64 n) {
  static kernels::Kernel k(op::add<float>);
  kernels::Loop loop;
  loop.ndim = 1, loop.size[0] = n, loop.stride[0][0] = loop.stride[1][0] = loop.stride[2][0] = 1;
  k(kCuda)(out, a, b, loop, stream());
}

}  // namespace

DeviceDecoder::DeviceDecoder(const GPT& model, std::int64_t slots, DType weights)
    : config_(model.config()), dtype_(weights), slots_(slots), drawable_(model.config().vocab_size) {
  BRRR_CHECK(weights == kFloat32 || weights == kBFloat16, "DeviceDecoder: weights must be float32 or bfloat16, got ",
             dtype_name(weights));
  BRRR_CHECK(slots >= 1, "DeviceDecoder: slots must be positive, got ", slots);
  for (const auto& [name, p] : model.named_parameters())
    BRRR_CHECK(p.device().is_cuda() && p.dtype() == kFloat32 && p.is_contiguous(), "DeviceDecoder: parameter ", name,
               " must be a contiguous float32 tensor on the CUDA device, got ", dtype_name(p.dtype()), " on ",
               p.device().str());
  // A matrix as the kernels read it: the model's own float32 tensor, or a bfloat16 copy on the
  // device (rounded to the nearest, ties to even: Tensor::to's cast).
  const auto matrix = [&](const Tensor& w) -> const void* {
    if (dtype_ == kFloat32) return w.data_ptr<float>();
    owned_.push_back(w.to(kBFloat16));
    return owned_.back().data_ptr<bf16>();
  };
  for (std::int64_t l = 0; l < config_.n_layer; ++l) {
    const auto block = model.h->at<Block>(static_cast<std::size_t>(l));
    Layer L;
    L.ln_1_w = floats(block->ln_1->weight), L.ln_1_b = floats(block->ln_1->bias);
    L.ln_2_w = floats(block->ln_2->weight), L.ln_2_b = floats(block->ln_2->bias);
    L.c_attn_b = floats(block->attn->c_attn->bias), L.attn_proj_b = floats(block->attn->c_proj->bias);
    L.c_fc_b = floats(block->mlp->c_fc->bias), L.mlp_proj_b = floats(block->mlp->c_proj->bias);
    L.c_attn = matrix(block->attn->c_attn->weight), L.attn_proj = matrix(block->attn->c_proj->weight);
    L.c_fc = matrix(block->mlp->c_fc->weight), L.mlp_proj = matrix(block->mlp->c_proj->weight);
    layers_.push_back(L);
  }
  head_ = matrix(model.head_weight());
  wte_ = floats(model.wte->weight), wpe_ = floats(model.wpe->weight);
  ln_f_w_ = floats(model.ln_f->weight), ln_f_b_ = floats(model.ln_f->bias);
  const TensorOptions device = TensorOptions().dtype(kFloat32).device(Device::cuda());
  const Shape cache{config_.n_layer, slots_, config_.block_size, config_.n_embd};
  keys_ = empty(cache, device), values_ = empty(cache, device);
  taken_.assign(static_cast<std::size_t>(slots_), false);
}

std::int64_t DeviceDecoder::cache_bytes() const { return 2 * keys_.numel() * static_cast<i64>(sizeof(float)); }

DeviceDecodeState DeviceDecoder::acquire() {
  const auto free = std::find(taken_.begin(), taken_.end(), false);
  BRRR_CHECK(free != taken_.end(), "DeviceDecoder: all ", slots_, " slots of the cache hold a sequence");
  *free = true;
  DeviceDecodeState s;
  s.slot = static_cast<std::int32_t>(free - taken_.begin());
  return s;
}

void DeviceDecoder::release(DeviceDecodeState& state) {
  BRRR_CHECK(state.slot >= 0 && state.slot < slots_ && taken_[static_cast<std::size_t>(state.slot)],
             "DeviceDecoder::release: slot ", state.slot, " is not one this decoder handed out");
  taken_[static_cast<std::size_t>(state.slot)] = false;
  state = DeviceDecodeState{};
}

void DeviceDecoder::ensure_rows(std::int64_t rows, std::int64_t wanted) {
  const i64 C = config_.n_embd;
  const TensorOptions f32 = TensorOptions().dtype(kFloat32).device(Device::cuda());
  if (rows > rows_ || wanted > wanted_) graphs_.clear(), launched_.clear();  // they hold the old buffers
  if (rows > rows_) {
    rows_ = rows;
    x_ = empty({rows, C}, f32), pe_ = empty({rows, C}, f32), normed_ = empty({rows, C}, f32);
    mean_ = empty({rows}, f32), rstd_ = empty({rows}, f32);
    qkv_ = empty({rows, 3 * C}, f32), attended_ = empty({rows, C}, f32), hidden_ = empty({rows, 4 * C}, f32);
  }
  if (wanted > wanted_) {
    wanted_ = wanted;
    gathered_ = empty({wanted, C}, f32), logits_ = empty({wanted, config_.vocab_size}, f32);
  }
  const i64 count = 4 * rows_ + wanted_;
  if (!indices_.defined() || indices_.numel() < count)
    indices_ = empty({count}, TensorOptions().dtype(kInt32).device(Device::cuda()));
}

void DeviceDecoder::run(std::int64_t R, std::int64_t W) {
  const i64 C = config_.n_embd, H = config_.n_head, V = config_.vocab_size;
  const std::int32_t* tokens = indices_.data_ptr<std::int32_t>();
  const std::int32_t *positions = tokens + R, *slots = tokens + 2 * R, *lengths = tokens + 3 * R;
  const std::int32_t* wanted = tokens + 4 * R;
  static kernels::Kernel append(op::append_cache<float>);
  static kernels::Kernel attend(op::attend_cache<float>);
  float *x = floats(x_), *normed = floats(normed_), *qkv = floats(qkv_), *attended = floats(attended_);
  float *hidden = floats(hidden_), *mean = floats(mean_), *rstd = floats(rstd_);
  gather(x, wte_, tokens, R, C);
  gather(floats(pe_), wpe_, positions, R, C);
  add(x, x, floats(pe_), R * C);
  kernels::CacheShape shape;
  shape.rows = R, shape.heads = H, shape.hs = C / H;
  shape.slots = slots_, shape.capacity = config_.block_size, shape.q_stride = 3 * C;
  const float eps = static_cast<float>(config_.layer_norm_eps);
  const int gelu = config_.activation == "gelu_erf" ? kGeluErf : kGeluTanh;
  const i64 layer_floats = slots_ * config_.block_size * C;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    float* k = floats(keys_) + static_cast<i64>(l) * layer_floats;
    float* v = floats(values_) + static_cast<i64>(l) * layer_floats;
    layer_norm(normed, mean, rstd, x, L.ln_1_w, L.ln_1_b, R, C, eps);
    linear(qkv, normed, L.c_attn, dtype_, L.c_attn_b, R, 3 * C, C, kStore);
    append(kCuda)(k, v, qkv + C, qkv + 2 * C, slots, lengths, shape, stream());
    attend(kCuda)(attended, qkv, k, v, slots, lengths, shape, stream());
    linear(x, attended, L.attn_proj, dtype_, L.attn_proj_b, R, C, C, kAdd);
    layer_norm(normed, mean, rstd, x, L.ln_2_w, L.ln_2_b, R, C, eps);
    linear(hidden, normed, L.c_fc, dtype_, L.c_fc_b, R, 4 * C, C, gelu);
    linear(x, hidden, L.mlp_proj, dtype_, L.mlp_proj_b, R, C, 4 * C, kAdd);
  }
  gather(floats(gathered_), x, wanted, W, C);
  layer_norm(normed, mean, rstd, floats(gathered_), ln_f_w_, ln_f_b_, W, C, eps);
  linear(floats(logits_), normed, head_, dtype_, nullptr, W, V, C, kStore);
}

const float* DeviceDecoder::forward(DeviceDecodeState* const* states, const std::int64_t* counts, std::int64_t n,
                                    const std::uint32_t* tokens, const std::int64_t* wanted, std::int64_t W) {
  enqueue(states, counts, n, tokens, wanted, W);
  return logits();
}

const float* DeviceDecoder::logits() {
  BRRR_CHECK(last_W_ > 0, "DeviceDecoder::logits: no pass has run");
  host_logits_.resize(static_cast<std::size_t>(last_W_ * config_.vocab_size));
  kernels::cuda_runtime()->copy(host_logits_.data(), logits_.data_ptr<float>(), host_logits_.size() * sizeof(float),
                                gpu::CopyKind::DeviceToHost);
  return host_logits_.data();
}

void DeviceDecoder::limit_draws(std::int64_t vocabulary) {
  BRRR_CHECK(vocabulary >= 1 && vocabulary <= config_.vocab_size, "DeviceDecoder::limit_draws: the ids drawn must be ",
             "1 to the model's ", config_.vocab_size, ", got ", vocabulary);
  drawable_ = vocabulary;
}

// The logits of ids past drawable_ set to -infinity in every row of the last pass: one strided
// copy of a single -infinity (stride 0) over the (W, V - drawable_) block.
void DeviceDecoder::mask_undrawable() {
  const i64 V = config_.vocab_size, tail = V - drawable_;
  if (tail == 0) return;
  if (!minus_infinity_.defined())
    minus_infinity_ = full({1}, -std::numeric_limits<double>::infinity(), TensorOptions().device(Device::cuda()));
  kernels::Loop loop;
  loop.ndim = 2;
  loop.size[0] = last_W_, loop.size[1] = tail;
  loop.stride[0][0] = V, loop.stride[0][1] = 1;  // out: the tail of each row
  loop.stride[1][0] = 0, loop.stride[1][1] = 0;  // in: the one value
  static kernels::Kernel copy(op::copy<float>);
  copy(kCuda)(logits_.data_ptr<float>() + drawable_, minus_infinity_.data_ptr<float>(), loop, stream());
}

const std::uint32_t* DeviceDecoder::greedy() {
  BRRR_CHECK(last_W_ > 0, "DeviceDecoder::greedy: no pass has run");
  mask_undrawable();
  // max_dim over each row of (W, V): its CUDA kernel keeps the first of equal largest values.
  static kernels::Kernel argmax(op::max_dim<float>);
  if (!top_.defined() || top_.numel() < wanted_) {
    top_ = empty({wanted_}, TensorOptions().dtype(kFloat32).device(Device::cuda()));
    top_index_ = empty({wanted_}, TensorOptions().dtype(kInt64).device(Device::cuda()));
  }
  argmax(kCuda)(top_.data_ptr<float>(), top_index_.data_ptr<std::int64_t>(), logits_.data_ptr<float>(), last_W_,
                config_.vocab_size, 1, stream());
  host_top_.resize(static_cast<std::size_t>(last_W_));
  kernels::cuda_runtime()->copy(host_top_.data(), top_index_.data_ptr<std::int64_t>(),
                                host_top_.size() * sizeof(std::int64_t), gpu::CopyKind::DeviceToHost);
  host_greedy_.assign(host_top_.begin(), host_top_.end());
  return host_greedy_.data();
}

const std::uint32_t* DeviceDecoder::sample(const double* rules) {
  BRRR_CHECK(last_W_ > 0, "DeviceDecoder::sample: no pass has run");
  namespace rule = kernels::sample;
  for (i64 w = 0; w < last_W_; ++w) {
    const double* r = rules + w * rule::kRuleSize;
    BRRR_CHECK(rule::rule_ok(r), "DeviceDecoder::sample: row ", w,
               "'s rule needs temperature > 0, a whole top_k >= 0, top_p in (0, 1] and u in [0, 1); got ",
               r[rule::kTemperature], ", ", r[rule::kTopK], ", ", r[rule::kTopP], ", ", r[rule::kUniform]);
  }
  mask_undrawable();
  static kernels::Kernel draw(op::sample_rows);
  if (!drawn_.defined() || drawn_.numel() < wanted_) {
    rules_ = empty({wanted_ * rule::kRuleSize}, TensorOptions().dtype(kFloat64).device(Device::cuda()));
    drawn_ = empty({wanted_}, TensorOptions().dtype(kInt32).device(Device::cuda()));
  }
  gpu::Runtime* rt = kernels::cuda_runtime();
  rt->copy(rules_.data_ptr<double>(), rules, static_cast<std::size_t>(last_W_ * rule::kRuleSize) * sizeof(double),
           gpu::CopyKind::HostToDevice);
  draw(kCuda)(drawn_.data_ptr<std::int32_t>(), logits_.data_ptr<float>(), rules_.data_ptr<double>(), last_W_,
              config_.vocab_size, stream());
  host_drawn_.resize(static_cast<std::size_t>(last_W_));
  rt->copy(host_drawn_.data(), drawn_.data_ptr<std::int32_t>(), host_drawn_.size() * sizeof(std::int32_t),
           gpu::CopyKind::DeviceToHost);
  for (i64 w = 0; w < last_W_; ++w)
    BRRR_CHECK(host_drawn_[w] >= 0, "DeviceDecoder::sample: row ", w, "'s logits hold a NaN or an infinity");
  host_greedy_.assign(host_drawn_.begin(), host_drawn_.end());
  return host_greedy_.data();
}

void DeviceDecoder::enqueue(DeviceDecodeState* const* states, const std::int64_t* counts, std::int64_t n,
                            const std::uint32_t* tokens, const std::int64_t* wanted, std::int64_t W) {
  for (std::int64_t i = 0; i < n; ++i)
    BRRR_CHECK(states[i]->slot >= 0 && states[i]->slot < slots_ && taken_[static_cast<std::size_t>(states[i]->slot)],
               "DeviceDecoder: sequence ", i, " has no slot of this decoder (acquire() gives one)");
  const auto held = [](const DeviceDecodeState& s) { return s.length; };
  const std::int64_t R = detail::check_pass(config_, states, held, counts, n, tokens, wanted, W);
  ensure_rows(R, W);
  // The indices, as run() reads them: tokens, positions, slots, lengths (position + 1), wanted.
  host_indices_.assign(static_cast<std::size_t>(4 * R + W), 0);
  std::int32_t* at = host_indices_.data();
  for (std::int64_t i = 0, r = 0; i < n; ++i)
    for (std::int64_t j = 0; j < counts[i]; ++j, ++r) {
      const i64 position = states[i]->length + j;
      at[r] = static_cast<std::int32_t>(tokens[r]), at[R + r] = static_cast<std::int32_t>(position);
      at[2 * R + r] = states[i]->slot, at[3 * R + r] = static_cast<std::int32_t>(position + 1);
    }
  for (std::int64_t w = 0; w < W; ++w) at[4 * R + w] = static_cast<std::int32_t>(wanted[w]);
  gpu::Runtime* rt = kernels::cuda_runtime();
  rt->copy(indices_.data_ptr<std::int32_t>(), host_indices_.data(), host_indices_.size() * sizeof(std::int32_t),
           gpu::CopyKind::HostToDevice);
  // A decoding step: every sequence one token, every row's logits (wanted ascends in 0 .. R - 1).
  const bool decoding = R == n && W == n;
  if (!decoding || !use_graphs_) {
    run(R, W);
  } else if (const auto graph = graphs_.find(R); graph != graphs_.end()) {
    graph->second.replay();
  } else if (launched_.count(R)) {
    // Its second time: the kernels' workspace has grown to this size already (a capture cannot
    // grow it), so the step is recorded, then replayed (a capture runs nothing).
    graphs_.emplace(R, cuda::Graph::capture([&] { run(R, W); })).first->second.replay();
  } else {
    run(R, W);
    launched_.insert(R);
  }
  last_W_ = W;
  for (std::int64_t i = 0; i < n; ++i) states[i]->length += counts[i];
}

void DeviceDecoder::set_cuda_graphs(bool on) {
  use_graphs_ = on;
  if (!on) graphs_.clear(), launched_.clear();
}

const float* DeviceDecoder::prefill(DeviceDecodeState& state, const std::uint32_t* tokens, std::int64_t n) {
  BRRR_CHECK(n >= 1, "Decoder::prefill: no tokens");
  DeviceDecodeState* s = &state;
  const std::int64_t last = n - 1;
  return forward(&s, &n, 1, tokens, &last, 1);
}

const float* DeviceDecoder::step(DeviceDecodeState* const* states, const std::uint32_t* tokens, std::int64_t n) {
  BRRR_CHECK(n >= 1, "Decoder::step: no sequences");
  for (auto i = static_cast<std::int64_t>(every_.size()); i < n; ++i) ones_.push_back(1), every_.push_back(i);
  return forward(states, ones_.data(), n, tokens, every_.data(), n);
}

}  // namespace brrr::models
