// serve/text_stream.h: how much of a growing completion text may be sent to the client yet.
// Chapter 20 (serving). Read before: serve/scheduler.h (which calls these after every token).
//
// Tokens are not characters: a byte-level BPE token can end halfway through a UTF-8 character
// (an emoji is often 2 or 3 tokens), and a stop string can arrive split over several tokens.
// So the text sent is always a prefix of the text decoded so far that (1) ends on a character
// boundary and (2) does not end with the beginning of a stop string, which the next token
// might complete; what is held back goes out when the request ends.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace brrr::serve {

// The length of the longest prefix of text that does not end inside a UTF-8 character: a
// trailing lead byte whose continuation bytes have not all arrived is cut off.
inline std::size_t utf8_complete_prefix(const std::string& text) {
  const std::size_t n = text.size();
  for (std::size_t back = 1; back <= std::min<std::size_t>(4, n); ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back for its lead
    const std::size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;  // only continuation bytes (not UTF-8): nothing to wait for
}

// Where the first stop string begins in text, searching from `from` on (a stop string that
// begins before the text already sent was held back, so none can); npos when none occurs.
inline std::size_t find_stop(const std::string& text, const std::vector<std::string>& stops, std::size_t from) {
  std::size_t first = std::string::npos;
  for (const std::string& stop : stops) {
    const std::size_t at = stop.empty() ? std::string::npos : text.find(stop, from);
    if (at != std::string::npos) first = std::min(first, at);
  }
  return first;
}

// How much of text may be sent now: whole characters, and not a tail that begins a stop string.
inline std::size_t sendable_prefix(const std::string& text, const std::vector<std::string>& stops) {
  std::size_t keep = utf8_complete_prefix(text);
  for (const std::string& stop : stops)
    for (std::size_t len = stop.empty() ? 0 : std::min(stop.size() - 1, text.size()); len > 0; --len)
      if (text.compare(text.size() - len, len, stop, 0, len) == 0) {
        keep = std::min(keep, text.size() - len);
        break;
      }
  return keep;
}

}  // namespace brrr::serve
