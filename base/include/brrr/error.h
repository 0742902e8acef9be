// brrr/error.h: the one exception type brrr throws, and the check macro every op uses.
// Chapter 01 (tensors and storage). Read next: dtype.h.
//
// An error message names the op, the shapes and what was expected, e.g.
//   matmul: inner dimensions differ: (4, 3) @ (5, 2)
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace brrr {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream message;
  (message << ... << args);
  throw Error(message.str());
}
}  // namespace detail

}  // namespace brrr

// BRRR_CHECK(condition, message parts...): throw brrr::Error with the parts joined.
#define BRRR_CHECK(cond, ...)                        \
  do {                                               \
    if (!(cond)) ::brrr::detail::fail(__VA_ARGS__); \
  } while (0)
