// train/report.h: what a training run prints and draws (inside brrr::train). Chapter 08
// (training). Read next: report.cpp.
#pragma once
#include <cstdint>
#include <string>

#include "brrr/models/gpt.h"
#include "brrr/tokenizer/text_tokenizer.h"

namespace brrr::train {

std::string duration(double seconds);  // "3m25s", "1h02m"
// A progress bar redrawn in place, when stdout is a terminal (nothing otherwise).
void progress_bar(std::int64_t step, std::int64_t total, double eta_seconds);
// out_dir/loss.png from out_dir/log.jsonl: each step's loss and the evaluations.
void plot_loss_curves(const std::string& out_dir, const std::string& preset);
// out_dir/attention.png: layer 0, head 0's attention over a fixed sentence.
void plot_attention(const std::string& out_dir, models::GPT& model, const tokenizer::TextTokenizer& tokenizer,
                    std::int64_t block_size);
// `tokens` tokens generated from a newline, streamed to stdout.
void print_sample(models::GPT& model, const tokenizer::TextTokenizer& tokenizer, std::int64_t tokens,
                  std::uint64_t seed);

}  // namespace brrr::train
