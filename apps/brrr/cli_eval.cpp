// apps/brrr/cli_eval.cpp: `brrr eval`, a model's loss and perplexity on a text (chapter 08,
// "Pretrained models"): a brrr checkpoint or a Hugging Face folder, by train/model_source.h.
#include <chrono>
#include <cstdio>

#include "brrr/autocast.h"
#include "brrr/parallel.h"
#include "commands.h"
#include "train/evaluate.h"
#include "train/model_source.h"
#include "train/trainer.h"

namespace brrr::cli {

void add_eval_commands(CLI::App& app) {
  struct EvalArgs {
    std::string checkpoint = "out", data, tokenizer, device = "cpu", dtype = "float32";
    int threads = 0;
    std::int64_t batch_size = 8;
    bool decoder = false;
  };
  auto a = std::make_shared<EvalArgs>();
  CLI::App* eval = app.add_subcommand("eval", "Mean next-token loss and perplexity of a model on a text or token files");
  eval->footer(
      "The file's tokens t0..tN-1 are cut into consecutive windows of the model's context length; each "
      "window predicts its next tokens (the last window may be shorter), so every token but the first is "
      "predicted exactly once. The loss is the mean over those N-1 predictions in nats per token, and the "
      "perplexity is e^loss. Last line: eval: N tokens predicted, loss L nats/token, perplexity P");
  eval->add_option("--checkpoint", a->checkpoint, "A checkpoint file, a training --out_dir (its newest checkpoint), "
                   "or a Hugging Face GPT-2 folder")->capture_default_str();
  eval->add_option("--data", a->data, "The text file to evaluate on, or token files: one, a folder of shards or a glob "
                  "(brrr or llm.c format, as brrr train --data takes them), read in name order as one sequence")
      ->required();
  eval->add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: the one saved beside the checkpoint, or the folder's)");
  eval->add_option("--threads", a->threads, "CPU threads (0: all cores)")->check(CLI::NonNegativeNumber)->capture_default_str();
  eval->add_option("--device", a->device, "cpu, cuda, emulator or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "emulator", "auto"}))->capture_default_str();
  eval->add_option("--dtype", a->dtype, "float32, or bf16 (the matrix products in bfloat16, chapter 18)")
      ->check(CLI::IsMember({"float32", "bf16"}))->capture_default_str();
  eval->add_option("--batch_size", a->batch_size, "Windows a forward pass")->check(CLI::PositiveNumber)->capture_default_str();
  eval->add_flag("--decoder", a->decoder,
                 "Through the generation path (brrr sample's and serve's Decoder; on --device cuda or emulator "
                 "the DeviceDecoder, chapter 20): --dtype bf16 is then its bf16 weights, x rounded to bf16 at each "
                 "matmul (chapter 08)");
  eval->callback([a] {
    if (a->threads > 0) set_num_threads(a->threads);
    const train::ModelSource source = train::open_model_and_tokenizer(a->checkpoint, a->tokenizer);
    const Device device = train::resolve_device(a->device);
    source.model->to(device);
    const std::vector<std::uint32_t> tokens = train::eval_tokens(a->data, *source.tokenizer, source.tokenizer_path);
    const Autocast autocast(a->dtype == "bf16" && !a->decoder ? kBFloat16 : kFloat32);
    const auto start = std::chrono::steady_clock::now();
    auto last = start;
    // A progress line every few seconds on a long file (to stderr: stdout's last line is the result).
    const auto progress = [&](std::int64_t done, std::int64_t total) {
      const auto now = std::chrono::steady_clock::now();
      if (done < total && now - last > std::chrono::seconds(5)) {
        last = now;
        const double secs = std::chrono::duration<double>(now - start).count();
        std::fprintf(stderr, "eval: %lld/%lld tokens (%.0f tokens/s)\n", static_cast<long long>(done),
                     static_cast<long long>(total), static_cast<double>(done) / secs);
      }
    };
    train::EvalResult r;
    const DType weights = a->dtype == "bf16" ? kBFloat16 : kFloat32;
    if (a->decoder && device.is_cpu()) {
      models::Decoder decoder(*source.model, weights);
      r = train::evaluate_tokens(decoder, tokens, progress);
    } else if (a->decoder) {
      models::DeviceDecoder decoder(*source.model, 1, weights);
      r = train::evaluate_tokens(decoder, tokens, progress);
    } else {
      r = train::evaluate_tokens(*source.model, tokens, a->batch_size, progress);
    }
    std::printf("eval: %lld tokens predicted, loss %.6f nats/token, perplexity %.4f\n", static_cast<long long>(r.predicted),
                r.loss, r.perplexity);
  });
}

}  // namespace brrr::cli
