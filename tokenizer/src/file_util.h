// tokenizer/src/file_util.h: the two text encodings the tokenizer files use (escaped strings,
// base64). Internal to the tokenizer. Reading and atomic writing come from brrr/io.h.
// Chapter 06 (tokenization). Read first: bpe_files.cpp, which uses all of this.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

namespace brrr::tokenizer::internal {

// Bytes as a double-quoted string a person can read: printable ASCII as itself, valid UTF-8
// characters as themselves, \" \\ \n \r \t, and every other byte as \xHH.
std::string quote(std::string_view bytes);
// The inverse of quote(). `s` starts with the opening quote; on success *consumed is the
// number of characters up to and including the closing quote. On failure returns false and
// sets *error to what was wrong.
bool unquote(std::string_view s, std::string* bytes, size_t* consumed, std::string* error);

std::string base64_encode(std::string_view bytes);
// False when `text` is not valid base64 (standard alphabet, '=' padding).
bool base64_decode(std::string_view text, std::string* bytes);

// The length of the valid UTF-8 character at the start of s, or 0 if it is not one.
size_t utf8_char_length(std::string_view s);

}  // namespace brrr::tokenizer::internal
