// tests/bf16_paths.h: the ways linear_rows multiplies by bfloat16 weights on this CPU (chapter
// 08): as dot products in rows.h's order everywhere (VDPBF16PS where the CPU has it), and on
// AMX's tile unit where the CPU has one and the OS grants it
// (kernels/cpu/rows/rows.h's amx switch). The kernel, Decoder and server tests run their bfloat16
// checks on each path through these, so the switch is always put back, even when a check throws.
#pragma once
#include <doctest/doctest.h>

#include "kernels/cpu/rows/rows.h"

namespace brrr::test {

// Sets the tile-unit switch for a scope, and restores what it was.
struct AmxScope {
  bool was = kernels::cpu::amx_enabled();
  explicit AmxScope(bool on) { kernels::cpu::set_amx_enabled(on); }
  ~AmxScope() { kernels::cpu::set_amx_enabled(was); }
  AmxScope(const AmxScope&) = delete;
  AmxScope& operator=(const AmxScope&) = delete;
};

// body(path, amx) on the dot products ("dots", false), then on the tile unit ("amx", true)
// where there is one; where there is not, a MESSAGE says the tile unit went unchecked.
template <class Body>
void for_each_bf16_path(const Body& body) {
  {
    const AmxScope dots(false);
    body("dots", false);
  }
  if (!kernels::cpu::amx_available()) {
    MESSAGE("no AMX tile unit here (or the OS refuses it): bfloat16 weights checked on the dot products only");
    return;
  }
  const AmxScope amx(true);
  body("amx", true);
}

}  // namespace brrr::test
