// apps/brrr/lab_sizes.cpp: `--size` strings into the kernel lab's numbers. Chapter 11. Read
// before: lab_sizes.h. Read next: cli_kernel_lab.cpp.
#include "lab_sizes.h"

#include <cctype>
#include <exception>

#include "brrr/error.h"
#include "brrr/strings.h"

namespace brrr::cli {

namespace {

std::int64_t parse_dim(const std::string& op, const std::string& text) {
  // "65536", or "2^16" for a power of two
  std::size_t used = 0;
  std::int64_t value = -1;
  try {
    const std::size_t caret = text.find('^');
    if (caret != std::string::npos) {
      const long long base = std::stoll(text.substr(0, caret), &used);
      BRRR_CHECK(used == caret, "");
      const std::string exponent_text = text.substr(caret + 1);
      const long long exponent = std::stoll(exponent_text, &used);
      BRRR_CHECK(used == exponent_text.size() && exponent >= 0 && exponent < 63, "");
      value = 1;
      for (long long i = 0; i < exponent; ++i) value *= base;
    } else {
      value = std::stoll(text, &used);
      BRRR_CHECK(used == text.size(), "");
    }
  } catch (const std::exception&) {
    value = -1;
  }
  BRRR_CHECK(value >= 1, "kernel-lab ", op, ": size '", text, "' is not a positive integer (or 2^k)");
  return value;
}

std::vector<std::string> split(const std::string& text, const std::string& separators) {
  std::vector<std::string> parts;
  std::string part;
  for (char ch : text) {
    if (separators.find(ch) != std::string::npos) {
      parts.push_back(part);
      part.clear();
    } else {
      part += ch;
    }
  }
  parts.push_back(part);
  return parts;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

std::vector<std::int64_t> parse_lab_size(const std::string& op, const std::vector<std::string>& dim_names,
                                         const std::string& text, const std::vector<std::int64_t>& defaults) {
  const std::string names = join(dim_names);
  if (text.find('=') != std::string::npos) {  // "C=1024,N=64": by name, the rest from defaults
    BRRR_CHECK(defaults.size() == dim_names.size(), "kernel-lab ", op, ": ", defaults.size(),
               " default sizes for sizes ", names);
    std::vector<std::int64_t> dims = defaults;
    for (const std::string& item : split(text, ", ")) {
      if (item.empty()) continue;
      const std::size_t eq = item.find('=');
      BRRR_CHECK(eq != std::string::npos, "kernel-lab ", op, ": size '", item, "' is not NAME=VALUE (sizes: ", names,
                 ")");
      const std::string name = item.substr(0, eq);
      std::size_t d = 0;
      while (d < dim_names.size() && lower(dim_names[d]) != lower(name)) ++d;
      BRRR_CHECK(d < dim_names.size(), "kernel-lab ", op, " has no size '", name, "' (sizes: ", names, ")");
      dims[d] = parse_dim(op, item.substr(eq + 1));
    }
    return dims;
  }
  const std::vector<std::string> parts = split(text, "x,");
  BRRR_CHECK(parts.size() == 1 || parts.size() == dim_names.size(), "kernel-lab ", op, " takes ", dim_names.size(),
             dim_names.size() == 1 ? " size (" : " sizes (", names, "), not '", text, "'");
  std::vector<std::int64_t> dims;
  for (std::size_t d = 0; d < dim_names.size(); ++d)
    dims.push_back(parse_dim(op, parts[parts.size() == 1 ? 0 : d]));  // one size: every dim
  return dims;
}

}  // namespace brrr::cli
