// train/cli_tokenizer.cpp: `brrr tokenizer ...` (chapter 06). Placeholder until the tokenizer lands.
#include "commands.h"

namespace brrr::cli {
void add_tokenizer_commands(CLI::App& app) { (void)app; }
}  // namespace brrr::cli
