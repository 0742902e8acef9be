// tokenizer/src/file_util.cpp: quoting and base64, the text encodings of tokenizer files.
// Chapter 06 (tokenization). Read first: file_util.h. Read next: bpe_files.cpp.
#include "file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "brrr/error.h"

namespace brrr::tokenizer::internal {

// ----------------------------------------------------------------------------
// Quoting

size_t utf8_char_length(std::string_view s) {
  if (s.empty()) return 0;
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = byte(0);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
  else return 0;
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i) & 0x3F);
  }
  // Reject overlong forms, surrogates and code points past U+10FFFF.
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

std::string quote(std::string_view bytes) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < bytes.size();) {
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c >= 0x20 && c < 0x7F) {
      out += char(c);
    } else if (size_t n = utf8_char_length(bytes.substr(i)); n > 1 && c != 0xC2) {
      // A whole non-ASCII character (U+0080..U+00BF, the C1 controls and the like, stay
      // escaped: they start with 0xC2 and are rarely what a reader wants to see raw).
      out.append(bytes.substr(i, n));
      i += n;
      continue;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
    i++;
  }
  out += '"';
  return out;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool unquote(std::string_view s, std::string* bytes, size_t* consumed, std::string* error) {
  bytes->clear();
  if (s.empty() || s[0] != '"') {
    *error = "expected a quoted string";
    return false;
  }
  for (size_t i = 1; i < s.size(); i++) {
    char c = s[i];
    if (c == '"') {
      *consumed = i + 1;
      return true;
    }
    if (c != '\\') {
      *bytes += c;
      continue;
    }
    if (++i >= s.size()) break;
    switch (s[i]) {
      case '\\': *bytes += '\\'; break;
      case '"': *bytes += '"'; break;
      case 'n': *bytes += '\n'; break;
      case 'r': *bytes += '\r'; break;
      case 't': *bytes += '\t'; break;
      case 'x': {
        int hi = i + 1 < s.size() ? hex_value(s[i + 1]) : -1;
        int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
          *error = "bad escape \\x: expected two hex digits";
          return false;
        }
        *bytes += char(hi * 16 + lo);
        i += 2;
        break;
      }
      default:
        *error = std::string("unknown escape \\") + s[i];
        return false;
    }
  }
  *error = "string has no closing quote";
  return false;
}

// ----------------------------------------------------------------------------
// Base64 (RFC 4648, standard alphabet, with '=' padding), as tiktoken files use.

static const char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(std::string_view bytes) {
  std::string out;
  size_t i = 0;
  auto at = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (at(i) << 16) | (at(i + 1) << 8) | at(i + 2);
    out += kBase64[v >> 18];
    out += kBase64[(v >> 12) & 63];
    out += kBase64[(v >> 6) & 63];
    out += kBase64[v & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest == 1) {
    uint32_t v = at(i) << 16;
    out += kBase64[v >> 18];
    out += kBase64[(v >> 12) & 63];
    out += "==";
  } else if (rest == 2) {
    uint32_t v = (at(i) << 16) | (at(i + 1) << 8);
    out += kBase64[v >> 18];
    out += kBase64[(v >> 12) & 63];
    out += kBase64[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

bool base64_decode(std::string_view text, std::string* bytes) {
  bytes->clear();
  if (text.empty() || text.size() % 4 != 0) return false;
  auto value = [](char c) -> int {
    const char* p = std::strchr(kBase64, c);
    return (c != 0 && p) ? int(p - kBase64) : -1;
  };
  for (size_t i = 0; i < text.size(); i += 4) {
    bool last = i + 4 == text.size();
    int a = value(text[i]), b = value(text[i + 1]);
    int c = text[i + 2] == '=' && last ? -2 : value(text[i + 2]);
    int d = text[i + 3] == '=' && last ? -2 : value(text[i + 3]);
    if (a < 0 || b < 0 || c == -1 || d == -1 || (c == -2 && d != -2)) return false;
    uint32_t v = (a << 18) | (b << 12) | ((c < 0 ? 0 : c) << 6) | (d < 0 ? 0 : d);
    *bytes += char(v >> 16);
    if (c >= 0) *bytes += char((v >> 8) & 0xFF);
    if (d >= 0) *bytes += char(v & 0xFF);
  }
  return true;
}

}  // namespace brrr::tokenizer::internal
