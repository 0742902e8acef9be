// lab/conformance.h: the conformance set (kernels/cuda/conformance.h): its cases, the fixed
// inputs of each, and `brrr conformance`, which runs every case on the emulator and, where a
// GPU is present, on the GPU, and compares their outputs bit for bit. Chapter 21 (Hopper).
// Read before: kernels/cuda/conformance.h. Read next: lab/conformance.cpp, then
// tests/emulator/test_conformance.cpp (each case against a CPU reference of the PTX ISA).
//
//   brrr conformance                       (the emulator; with a GPU, both, compared)
//   brrr conformance --out bits.txt        (each case's output words, for a later comparison)
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/conformance.h"

namespace brrr::lab {

// Every case, in the order they run (conformance.cpp).
const std::vector<kernels::ConformanceCase>& conformance_cases();
// A case's inputs: fixed words, chosen per case (conformance.cpp says what each exposes).
std::vector<std::uint32_t> conformance_inputs(const kernels::ConformanceCase& c);
// Runs one case on the emulator, or on the GPU (`gpu`; an error without one), and returns its
// output words.
std::vector<std::uint32_t> run_conformance(const kernels::ConformanceCase& c, bool gpu);
// FNV-1a over the words' bytes: a short name for an output, as the report prints it.
std::uint64_t conformance_hash(const std::vector<std::uint32_t>& words);

// `brrr conformance`: every case (or those whose name contains `only`) on the emulator, and on
// the GPU when `gpu`; one line per case; each case's words to `bits_file` when it is not empty.
// Returns the number of cases whose outputs differ (0 without a GPU).
int run_conformance_set(std::FILE* out, bool gpu, const std::string& only, const std::string& bits_file);

}  // namespace brrr::lab
