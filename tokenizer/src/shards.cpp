// tokenizer/src/shards.cpp: writing a corpus's ids into shards, and finding shards to read.
// Chapter 06 (tokenization). Read first: brrr/tokenizer/shards.h. Read next: train/data.cpp.
#include "brrr/tokenizer/shards.h"

#include <glob.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "brrr/error.h"

namespace brrr::tokenizer {

namespace fs = std::filesystem;

std::string shard_file_name(const std::string& stem, uint64_t index) {
  char number[24];
  std::snprintf(number, sizeof number, "%06llu", static_cast<unsigned long long>(index));
  return stem + "_" + number + ".bin";
}

bool is_val_shard(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  size_t start = 0;
  for (size_t i = 0; i <= name.size(); i++) {
    if (i == name.size() || name[i] == '_' || name[i] == '-' || name[i] == '.') {
      if (name.compare(start, i - start, "val") == 0 && i - start == 3) return true;
      start = i + 1;
    }
  }
  return false;
}

bool looks_like_token_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char head[8] = {};
  if (!f.read(head, 8)) return false;
  int32_t magic;
  std::memcpy(&magic, head, 4);
  return std::memcmp(head, kTokenFileMagic, 8) == 0 || magic == kLlmcMagic || magic == kLlmcLlama3Magic;
}

bool names_token_files(const std::string& spec) {
  return std::filesystem::is_directory(spec) || spec.find_first_of("*?[") != std::string::npos ||
         (std::filesystem::is_regular_file(spec) && looks_like_token_file(spec));
}

std::vector<std::string> find_shards(const std::string& spec) {
  std::vector<std::string> paths;
  if (fs::is_directory(spec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(spec))
      if (e.is_regular_file() && e.path().extension() == ".bin") paths.push_back(e.path().string());
    BRRR_CHECK(!paths.empty(), spec, ": a folder with no shards (*.bin files) in it");
  } else if (spec.find_first_of("*?[") != std::string::npos) {
    glob_t g{};
    const int rc = ::glob(spec.c_str(), 0, nullptr, &g);
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
      if (fs::is_regular_file(g.gl_pathv[i])) paths.push_back(g.gl_pathv[i]);
    ::globfree(&g);
    BRRR_CHECK(!paths.empty(), spec, ": no file matches this pattern");
  } else {
    BRRR_CHECK(fs::is_regular_file(spec), spec, ": no such file or folder");
    paths.push_back(spec);
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

ShardWriter::ShardWriter(std::string dir, std::string stem, uint64_t shard_tokens, const TokenFileSpec& spec)
    : dir_(std::move(dir)), stem_(std::move(stem)), shard_tokens_(shard_tokens), spec_(spec) {
  BRRR_CHECK(shard_tokens_ > 0, "shards: shard_tokens must be positive");
  BRRR_CHECK(spec_.format != TokenFileFormat::kLlmc || shard_tokens_ < (uint64_t(1) << 31),
             "shards: llm.c's format holds fewer than 2^31 ids a shard, asked for ", shard_tokens_);
  fs::create_directories(dir_);
  const std::string first = (fs::path(dir_) / shard_file_name(stem_, 0)).string();
  BRRR_CHECK(!fs::exists(first), first, ": already there; remove the old shards (",
             (fs::path(dir_) / (stem_ + "_*.bin")).string(), ") or write to another folder");
}

ShardWriter::~ShardWriter() = default;

void ShardWriter::write(std::span<const uint32_t> ids) {
  while (!ids.empty()) {
    if (!current_) {
      const std::string path = (fs::path(dir_) / shard_file_name(stem_, paths_.size())).string();
      current_ = std::make_unique<TokenFileWriter>(path, spec_);
      paths_.push_back(path);
    }
    const size_t room = size_t(shard_tokens_ - current_->count());
    const size_t n = std::min(room, ids.size());
    current_->write(ids.first(n));
    tokens_ += n;
    ids = ids.subspan(n);
    if (current_->count() == shard_tokens_) {
      current_->commit();
      current_.reset();
    }
  }
}

std::vector<std::string> ShardWriter::finish() {
  if (current_) {
    current_->commit();
    current_.reset();
  }
  return paths_;
}

}  // namespace brrr::tokenizer
