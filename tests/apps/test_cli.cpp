// tests/apps/test_cli.cpp: the brrr program as a new user meets it: help for every flag,
// flags spelled with dashes or underscores, one-line errors that name the real problem,
// tiktoken rank files on the command line, and progress that stays readable in a log file.
// Each case runs the program this build made (BRRR_CLI) in a shell.
// GCC 12 at -O2 with the sanitizers warns inside <regex> (std::function in its automaton) that
// a value "may be used uninitialized": a false positive, GCC bug 105562. This file only (and
// GCC only: clang has no such warning, and would warn about the unknown name).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

Result brrr(const std::string& args) {
  Result r;
  std::FILE* pipe = popen((std::string(BRRR_CLI) + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A scratch folder, removed at the end of the test case.
struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name) : dir(fs::temp_directory_path() / ("brrr_test_apps_" + name)) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string operator/(const std::string& file) const { return (dir / file).string(); }
};

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A training log without its timings ("ms":...), which differ from run to run.
std::string log_without_times(const std::string& path) {
  return std::regex_replace(read_file(path), std::regex("\"ms\":[-+.0-9e]+,"), "");
}

std::string corpus(std::size_t bytes) {
  return read_file(std::string(BRRR_SHARED_DIR) + "/data/tinyshakespeare.txt").substr(0, bytes);
}

// The subcommands listed under "Subcommands:" in a help text.
std::vector<std::string> subcommands_in(const std::string& help) {
  std::vector<std::string> names;
  bool in_list = false;
  for (const std::string& line : lines_of(help)) {
    if (line == "Subcommands:") {
      in_list = true;
    } else if (in_list) {
      std::smatch m;
      if (std::regex_match(line, m, std::regex("  ([a-z][a-z-]*) +\\S.*"))) names.push_back(m[1]);
      else if (!line.empty()) in_list = false;
    }
  }
  return names;
}

// The options in a help text that have no description: CLI11 writes "  --name TYPE  text" or,
// when the name and type are long, the text on the next line, indented.
std::vector<std::string> undescribed_options(const std::string& help) {
  std::vector<std::string> missing;
  const std::vector<std::string> lines = lines_of(help);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(lines[i], m, std::regex("  (-[^ ]+)(.*)"))) continue;
    if (std::regex_search(std::string(m[2]), std::regex("  +\\S"))) continue;  // text on this line
    if (i + 1 < lines.size() && std::regex_match(lines[i + 1], std::regex(" {20,}\\S.*"))) continue;
    missing.push_back(m[1]);
  }
  return missing;
}

// Trains a model small enough to take a fraction of a second; extra flags are appended.
Result train_tiny(const std::string& out_dir, const std::string& extra = "") {
  return brrr("train --max-iters 2 --eval-interval 2 --eval-iters 1 --n-layer 1 --n-head 2 --n-embd 16 "
              "--block-size 8 --batch-size 2 --out-dir " + out_dir + " " + extra);
}

}  // namespace

TEST_CASE("cli help: every option of every subcommand has a description") {
  std::vector<std::string> commands = {""};
  for (std::size_t i = 0; i < commands.size(); ++i) {
    const Result r = brrr(commands[i] + " --help");
    INFO("brrr " << commands[i] << " --help:\n" << r.out);
    REQUIRE(r.code == 0);
    CHECK(undescribed_options(r.out).empty());
    for (const std::string& name : undescribed_options(r.out)) MESSAGE("no description: brrr ", commands[i], " ", name);
    for (const std::string& sub : subcommands_in(r.out)) commands.push_back(commands[i] + " " + sub);
  }
  // The program's subcommands and the tokenizer's were all visited.
  for (const char* expected : {" train", " sample", " tokenizer encode", " tokenizer info", " kernel-lab"})
    CHECK(std::find(commands.begin(), commands.end(), expected) != commands.end());
  // The checker itself tells a described option from a bare one.
  CHECK(undescribed_options("  --a INT=1        what a is\n  --b TEXT\n  --c TEXT=[x] ...\n"
                            "                              what c is\n") == std::vector<std::string>{"--b"});
}

TEST_CASE("cli help: train's help groups its flags and shows the chosen preset's defaults") {
  const Result tiny = brrr("train --help");
  REQUIRE(tiny.code == 0);
  for (const char* group : {"Model:", "Data:", "Optimisation:", "Schedule:", "Evaluation:", "Checkpoints:", "Device:"})
    CHECK_MESSAGE(has(tiny.out, std::string("\n") + group + "\n"), group);
  CHECK(std::regex_search(tiny.out, std::regex("--n_layer INT=4 ")));
  CHECK(std::regex_search(tiny.out, std::regex("--learning_rate FLOAT=0.001 +peak learning rate")));
  const Result big = brrr("train --preset gpt-12m --help");
  REQUIRE(big.code == 0);
  CHECK(std::regex_search(big.out, std::regex("--n_layer INT=6 ")));
  CHECK(std::regex_search(big.out, std::regex("--n_embd INT=384 ")));
  CHECK(brrr("train --preset gpt-13m --help").code != 0);
}

TEST_CASE("cli: --version says what the build is") {
  const Result r = brrr("--version");
  CHECK(r.code == 0);
  CHECK(std::regex_search(r.out, std::regex("^brrr [0-9]+\\.[0-9]+")));
  CHECK(has(r.out, "CUDA backend: "));
  CHECK(has(r.out, "CPU code: "));
  CHECK(has(r.out, "BF16: "));
}

TEST_CASE("cli flags: dashes and underscores both work, an unknown flag is one line with a suggestion, exit 2") {
  Scratch s("flags");
  const Result dashed = train_tiny(s / "dashed", "--learning-rate 0.002 --keep-checkpoints 1");
  INFO(dashed.out);
  REQUIRE(dashed.code == 0);
  CHECK(fs::exists(s / "dashed/ckpt-00000002.safetensors"));
  const Result underscored = brrr("train --max_iters 2 --eval_interval 2 --eval_iters 1 --n_layer 1 --n_head 2 "
                                  "--n_embd 16 --block_size 8 --batch_size 2 --out_dir " + s / "under");
  CHECK(underscored.code == 0);
  // The same run either way: the logs agree line for line; the dashed learning rate was used.
  const Result same = train_tiny(s / "again");
  REQUIRE(same.code == 0);
  CHECK(log_without_times(s / "again/log.jsonl") == log_without_times(s / "under/log.jsonl"));
  CHECK(has(log_without_times(s / "under/log.jsonl"), "\"step\":1"));
  CHECK(log_without_times(s / "dashed/log.jsonl") != log_without_times(s / "under/log.jsonl"));

  Result r = brrr("train --lerning-rate 0.1");
  CHECK(r.code == 2);
  CHECK(lines_of(r.out).size() == 1);
  CHECK(has(r.out, "brrr train: unknown option --lerning-rate; did you mean --learning_rate?"));
  CHECK(!has(r.out, "Usage:"));
  r = brrr("sample --temprature 0.5");
  CHECK(r.code == 2);
  CHECK(has(r.out, "brrr sample: unknown option --temprature; did you mean --temperature?"));
  r = brrr("train --max-iters lots");
  CHECK(r.code == 2);
  CHECK(has(r.out, "--max_iters"));
  CHECK(lines_of(r.out).size() == 1);
  r = brrr("tokenizer encode --tokenizer " + std::string(BRRR_CLI) + " --input " + std::string(BRRR_CLI) + " --out y --bogus");
  CHECK(r.code == 2);
  CHECK(has(r.out, "brrr tokenizer encode: unknown option --bogus"));

  // JSON config keys follow the same rule: dashes work, an unknown key suggests the known one.
  write_file(s / "ok.json", R"({"max-iters": 2, "eval-interval": 2, "eval_iters": 1, "n-layer": 1, "n_head": 2,
                               "n-embd": 16, "block-size": 8, "batch-size": 2})");
  r = brrr("train --config " + s / "ok.json" + " --out-dir " + s / "json");
  CHECK(r.code == 0);
  CHECK(log_without_times(s / "json/log.jsonl") == log_without_times(s / "under/log.jsonl"));
  write_file(s / "bad.json", R"({"lerning_rate": 0.1})");
  r = brrr("train --config " + s / "bad.json");
  CHECK(r.code == 1);
  CHECK(has(r.out, "unknown key 'lerning_rate'"));
  CHECK(has(r.out, "did you mean 'learning_rate'?"));
}

TEST_CASE("cli errors: a batch too big for any machine says which tensors, how many bytes, and what to lower") {
  Scratch s("huge_batch");
  // 1e10 sequences of 64 tokens: 5.1 TB of token ids, refused before anything is allocated.
  const Result r = brrr("train --batch_size 10000000000 --max_iters 1 --out_dir " + s / "run");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(has(r.out, "brrr: error: out of memory: the batch's token ids x and y, two (10000000000, 64) int32 tensors, "
                   "need 5120.0 GB"));
  CHECK(has(r.out, "lower --batch_size or --block_size"));
  CHECK(!has(r.out, "bad_alloc"));
}

TEST_CASE("cli errors: a number that is not finite is refused as such, in one line, exit 2") {
  for (const char* value : {"nan", "inf", "-inf", "NaN"}) {
    const Result r = brrr(std::string("train --learning_rate ") + value);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK(lines_of(r.out).size() == 1);
    CHECK(has(r.out, std::string("--learning_rate: expects a finite number, got '") + value + "'"));
  }
}

TEST_CASE("cli errors: sample, train --resume and verify-reference name the real problem") {
  Scratch s("errors");
  REQUIRE(train_tiny(s / "run").code == 0);
  fs::create_directories(s / "empty");
  const std::string checkpoint = s / "run/ckpt-00000002.safetensors";
  write_file(s / "damaged.safetensors", read_file(checkpoint).substr(0, 3000));

  Result r = brrr("sample --checkpoint " + s / "missing");
  CHECK(r.code == 1);
  CHECK(has(r.out, "no checkpoint at '" + s / "missing" + "'"));
  CHECK(!has(r.out, "tokenizer"));
  r = brrr("sample --checkpoint " + s / "empty");
  CHECK(r.code == 1);
  CHECK(has(r.out, "no checkpoint (ckpt-*.safetensors) in '" + s / "empty" + "'"));
  r = brrr("sample --checkpoint " + s / "damaged.safetensors");
  CHECK(r.code == 1);
  CHECK(has(r.out, s / "damaged.safetensors" + ": header length"));
  CHECK(has(r.out, "runs past the end of the file"));
  // A tokenizer that does not fit the model: a BPE of 300 tokens for a model of 65.
  write_file(s / "text.txt", corpus(50000));
  REQUIRE(brrr("tokenizer train --input " + s / "text.txt" + " --vocab-size 300 --out " + s / "bpe.txt").code == 0);
  r = brrr("sample --checkpoint " + s / "run" + " --tokenizer " + s / "bpe.txt");
  CHECK(r.code == 1);
  CHECK(has(r.out, "has 300 tokens but the model's vocabulary is 65"));
  r = brrr("sample --checkpoint " + s / "run" + " --tokenizer " + s / "nope");
  CHECK(r.code == 1);
  CHECK(has(r.out, "no tokenizer at '" + s / "nope" + "'"));
  // It works when nothing is wrong.
  r = brrr("sample --checkpoint " + s / "run" + " --max-new-tokens 4 --prompt Hi");
  CHECK(r.code == 0);

  r = brrr("train --resume --out-dir " + s / "nowhere");
  CHECK(r.code == 1);
  CHECK(has(r.out, "--resume: no folder '" + s / "nowhere" + "'"));
  CHECK(!fs::exists(s / "nowhere"));  // nothing was written
  r = brrr("train --resume --out-dir " + s / "empty");
  CHECK(r.code == 1);
  CHECK(has(r.out, "--resume: no checkpoint (ckpt-*.safetensors) in '" + s / "empty" + "'"));
  fs::copy_file(s / "damaged.safetensors", s / "empty/ckpt-00000009.safetensors");
  r = brrr("train --resume --out-dir " + s / "empty");
  CHECK(r.code == 1);
  CHECK(has(r.out, "ckpt-00000009.safetensors: header length"));

  r = brrr("verify-reference " + s / "missing.safetensors");
  CHECK(r.code == 2);
  CHECK(has(r.out, "File does not exist: " + s / "missing.safetensors"));
  r = brrr("verify-reference " + s / "damaged.safetensors");
  CHECK(r.code == 1);
  CHECK(has(r.out, "damaged.safetensors: header length"));
  // A brrr checkpoint is not a PyTorch reference file: the error says which tensor is missing.
  r = brrr("verify-reference " + checkpoint);
  CHECK(r.code == 1);
  CHECK(has(r.out, "brrr: error: "));
}

TEST_CASE("cli errors: train names the setting that is wrong, each on its own") {
  Scratch s("settings");
  struct Bad {
    std::string flags, says;
  };
  const std::vector<Bad> cases = {
      {"--max_iters -5", "config: max_iters must be 0 or more (training steps; 0 evaluates and saves the model as it "
                         "starts), got -5"},
      {"--batch_size 0", "config: batch_size must be at least 1 (sequences per micro-batch), got 0"},
      {"--grad_accum -1", "config: grad_accum must be at least 1 (micro-batches per step), got -1"},
      {"--warmup_iters -1", "config: warmup_iters must be 0 or more, got -1"},
      {"--lr_decay_iters -3", "config: lr_decay_iters must be 0 or more, got -3"},
      {"--eval_interval 0", "config: eval_interval must be at least 1"},
      {"--eval_iters 0", "config: eval_iters must be at least 1"},
      {"--log_interval 0", "config: log_interval must be at least 1"},
      {"--checkpoint_interval -1", "config: checkpoint_interval must be 0 (save at every evaluation) or more, got -1"},
      {"--keep_checkpoints 0", "config: keep_checkpoints must be at least 1, got 0"},
      {"--sample_tokens -1", "config: sample_tokens must be 0 (no sample) or more, got -1"},
      {"--learning_rate -0.1", "config: learning_rate must be positive, got -0.1"},
      {"--min_lr 0.5", "config: min_lr must be in [0, learning_rate] = [0, 0.001], got 0.5"},
      {"--dropout 1", "config: dropout must be in [0, 1), got 1"},
      {"--weight_decay -1", "config: weight_decay must be 0 or more, got -1"},
      {"--beta2 1", "config: beta2 must be in [0, 1), got 1"},
      {"--grad_clip -1", "config: grad_clip must be 0 (no clipping) or more, got -1"},
      {"--val_fraction 1", "config: val_fraction must be in [0, 1), got 1"},
      {"--threads -2", "config: threads must be 0 (all cores) or positive, got -2"},
  };
  for (const Bad& b : cases) {
    const Result r = brrr("train " + b.flags + " --out_dir " + s / "run");
    INFO(b.flags << "\n" << r.out);
    CHECK(r.code == 1);
    CHECK(lines_of(r.out).size() == 1);
    CHECK(has(r.out, "brrr: error: " + b.says));
    CHECK(!fs::exists(s / "run"));  // refused before anything was written
  }
}

TEST_CASE("cli errors: train on a file that is not UTF-8 says where, and --tokenizer bpe trains on its bytes") {
  Scratch s("not_text");
  std::string bytes = corpus(3000);
  std::uint32_t x = 12345;  // then random bytes, as an archive or an image would be
  for (int i = 0; i < 30000; ++i) bytes += static_cast<char>((x = x * 1103515245u + 12345u) >> 24);
  write_file(s / "data.bin", bytes);
  Result r = train_tiny(s / "run", "--data " + s / "data.bin");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(has(r.out, "brrr: error: the training text '" + s / "data.bin" + "' is not UTF-8: the byte at offset "));
  CHECK(has(r.out, "To train on the bytes themselves, use the byte-level BPE tokenizer: --tokenizer bpe"));
  std::smatch m;
  const std::string out = r.out;
  REQUIRE(std::regex_search(out, m, std::regex("at offset ([0-9]+) \\(0x([0-9a-f]{2})\\)")));
  const std::size_t offset = std::stoul(m[1]);
  CHECK(offset >= 3000);  // the text before the random bytes is ASCII
  CHECK(offset < 3100);   // random bytes are not UTF-8 for long
  CHECK(std::stoul(std::string(m[2]), nullptr, 16) == static_cast<unsigned char>(bytes[offset]));
  CHECK(!has(r.out, "char tokenizer, vocab"));  // no vocabulary was made
  // As it says: byte-level BPE trains on any bytes.
  r = train_tiny(s / "run", "--data " + s / "data.bin" + " --tokenizer bpe --bpe_vocab_size 300");
  CHECK(r.code == 0);
}

TEST_CASE("cli errors: train's out_dir naming a file says so, not a filesystem error") {
  Scratch s("out_dir_file");
  write_file(s / "taken", "not a folder\n");
  Result r = brrr("train --max_iters 1 --out_dir " + s / "taken");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(lines_of(r.out).size() == 1);
  CHECK(has(r.out, "brrr: error: out_dir '" + s / "taken" + "' is a file, not a folder (out_dir is the folder a run "
                   "writes its checkpoints, log and plots to: name another, or move the file away)"));
  r = brrr("train --max_iters 1 --out_dir " + s / "taken/");
  CHECK(has(r.out, "brrr: error: out_dir '" + s / "taken/" + "' is a file, not a folder"));
  r = brrr("train --max_iters 1 --out_dir " + s / "taken/run");
  CHECK(r.code == 1);
  CHECK(has(r.out, "brrr: error: out_dir '" + s / "taken/run" + "' cannot be made: '" + s / "taken" +
                   "' is a file, not a folder"));
  CHECK(!has(r.out, "filesystem error"));
  CHECK(read_file(s / "taken") == "not a folder\n");
}

TEST_CASE("cli tokenizer: tiktoken rank files encode and decode like the trained tokenizer, info describes both") {
  Scratch s("tiktoken");
  const std::string text = corpus(120000);
  write_file(s / "text.txt", text);
  Result r = brrr("tokenizer train --input " + s / "text.txt" + " --vocab-size 500 --out " + s / "tok.txt" +
                  " --tiktoken " + s / "tok.tiktoken");
  INFO(r.out);
  REQUIRE(r.code == 0);
  // Progress piped into a file is plain lines, not carriage-return redraws.
  CHECK(!has(r.out, "\r"));
  CHECK(lines_of(r.out).size() < 20);

  REQUIRE(brrr("tokenizer encode --tokenizer " + s / "tok.txt" + " --input " + s / "text.txt" + " --out " +
               s / "a.bin").code == 0);
  r = brrr("tokenizer encode --tokenizer " + s / "tok.tiktoken" + " --input " + s / "text.txt" + " --out " +
           s / "b.bin");
  REQUIRE(r.code == 0);
  CHECK(read_file(s / "a.bin").size() > 1000);
  CHECK(read_file(s / "a.bin") == read_file(s / "b.bin"));
  REQUIRE(brrr("tokenizer decode --tokenizer " + s / "tok.tiktoken" + " --input " + s / "b.bin" + " --out " +
               s / "back.txt").code == 0);
  CHECK(read_file(s / "back.txt") == text);
  // A different split pattern gives different ids: the option is used, not ignored.
  REQUIRE(brrr("tokenizer encode --tokenizer " + s / "tok.tiktoken" + " --pattern cl100k --input " +
               s / "text.txt" + " --out " + s / "c.bin").code == 0);
  CHECK(read_file(s / "c.bin") != read_file(s / "a.bin"));

  r = brrr("tokenizer info " + s / "tok.tiktoken");
  CHECK(r.code == 0);
  CHECK(has(r.out, "tiktoken"));
  CHECK(has(r.out, "(tiktoken ranks), 500 tokens"));  // 499 ranks and <|endoftext|> after them
  CHECK(has(r.out, "longest tokens:"));
  r = brrr("tokenizer info " + s / "tok.txt");
  CHECK(r.code == 0);
  CHECK(has(r.out, "500 tokens"));
  CHECK(has(r.out, "special tokens: <|endoftext|>"));

  write_file(s / "junk.tiktoken", "not base64 at all\n");
  r = brrr("tokenizer encode --tokenizer " + s / "junk.tiktoken" + " --input " + s / "text.txt" + " --out " +
           s / "d.bin");
  CHECK(r.code == 1);
  CHECK(has(r.out, "junk.tiktoken"));
  CHECK(!fs::exists(s / "d.bin"));
  r = brrr("tokenizer info " + s / "missing.txt");
  CHECK(r.code != 0);
  CHECK(has(r.out, "missing.txt"));
}

// The registry's decision for one call, as `brrr kernels OP --head-size N --dropout P` shows it
// (issue 29): which variant runs on each device and dtype, and why each other was passed over.
TEST_CASE("cli kernels: the decision for a call names what runs and why the others do not") {
  const Result r = brrr("kernels causal_attention --head-size 160 --dropout 0.1 --emulator");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(has(r.out, "causal_attention for float32 products, head size 160, dropout 0.1:"));
  CHECK(has(r.out, "cpu float32: composed runs; passed over: flash (no dropout on the attention weights)"));
  CHECK(has(r.out, "cuda float32: composed runs; passed over: flash (no dropout on the attention weights)"));
  const Result tiles = brrr("kernels attention_forward --head-size 160 --emulator");
  INFO(tiles.out);
  CHECK(has(tiles.out, "cuda float32: naive runs; passed over: flash (head size 160 > 128, the most its tiles hold)"));
  // The list shows each variant's rule; a call's facts without an op are refused in one line.
  const Result list = brrr("kernels attention_forward --emulator");
  CHECK(has(list.out, "flash: variant 2: tiles of keys and values through shared memory, online softmax [runs: "
                      "full-precision products, head size <= 128]"));
  const Result bare = brrr("kernels --head-size 160");
  CHECK(bare.code != 0);
  CHECK(has(bare.out, "need an op"));
}

// Precision is a slot of the op, not its name (issue 29): `brrr kernels matmul` lists the exact
// slots and matmul:bf16, --autocast asks the bf16-products slot, and the kernel lab reaches the
// bf16 rows of an op with --autocast (bf16 products) and --dtype bfloat16 (bf16 data).
TEST_CASE("cli kernels and kernel-lab: an op's bf16 products and bf16 data are reached through the op's name") {
  const Result list = brrr("kernels matmul");
  INFO(list.out);
  CHECK(list.code == 0);
  CHECK(has(list.out, "matmul:bf16\n"));
  CHECK(has(list.out, "plain: the bf16 GEMM's packing"));
  const Result autocast = brrr("kernels matmul --autocast");
  INFO(autocast.out);
  CHECK(has(autocast.out, "matmul:bf16 for bf16 products:"));
  const Result products = brrr("kernel-lab matmul --autocast --device cpu --mode check --size 5x7x3 --seed 1");
  INFO(products.out);
  CHECK(products.code == 0);
  CHECK(has(products.out, "kernel-lab matmul:bf16: "));
  const Result data = brrr("kernel-lab matmul --dtype bfloat16 --device cpu --mode check --size 5x7x3 --seed 1");
  INFO(data.out);
  CHECK(data.code == 0);
  CHECK(has(data.out, "kernel-lab matmul/bf16: "));
  const Result both = brrr("kernel-lab matmul --autocast --dtype bfloat16 --device cpu");
  CHECK(both.code != 0);
  CHECK(has(both.out, "ask for one of them"));
  const Result old = brrr("kernels matmul_bf16");
  CHECK(old.code != 0);
  CHECK(has(old.out, "no op 'matmul_bf16'"));
}
