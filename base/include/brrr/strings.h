// brrr/strings.h: small text helpers for messages. Chapter 01.
#pragma once
#include <string>
#include <vector>

namespace brrr {

// "a, b, c": the items with sep between them (as error messages list what exists).
inline std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

}  // namespace brrr
