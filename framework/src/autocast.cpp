// framework/src/autocast.cpp: the Autocast scope (brrr/autocast.h). Chapter 18.
#include "brrr/autocast.h"

#include "brrr/error.h"

namespace brrr {

namespace {
thread_local DType current = kFloat32;
}

Autocast::Autocast(DType dtype) : previous_(current) {
  BRRR_CHECK(dtype == kBFloat16 || dtype == kFloat32, "Autocast: dtype must be bfloat16 (on) or float32 (off), got ",
             dtype_name(dtype));
  current = dtype;
}

Autocast::~Autocast() { current = previous_; }

DType autocast_dtype() { return current; }

}  // namespace brrr
