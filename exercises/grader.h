// exercises/grader.h: the course's graded exercises: the table, and a grader for each.
// The course meets them from chapter 03 on; docs/teaching.md explains the machinery.
// Read next: grader.cpp (the graders), exercises/student/student.h (what a student
// writes), apps/brrr/cli_exercises.cpp (`brrr exercises`).
//
// Each exercise is a stub in exercises/student/ that a student fills in. Its grader checks one
// variant of it: "student" (exercises/student) or "solution" (exercises/solutions, the
// reference, built when that folder exists). The same grader runs from `brrr exercises`,
// from ctest (`ctest -L ex03.1`), from scripts/grade.sh and from the notebooks.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace brrr {
class Tensor;
}
namespace brrr::lab {
enum class LabDevice;  // kernel_lab.h
}

namespace brrr::exercises {

// Adds the exercises' variants to the kernel registry ("student", and "solution" where the
// reference solutions are built). Programs that offer the exercises call it first: the brrr
// program, the exercise tests, the notebooks. Calling it again does nothing.
void install();

enum class Status {
  NotStarted,  // the stub still throws "not written yet"
  Failing,     // it runs, but a check failed (the message says which)
  Passing,
  Coming,      // the exercise is planned; its stub and grader are not written yet
};
const char* status_name(Status status);  // "not started", "failing", "passing", "coming"

struct Result {
  Status status = Status::Coming;
  std::string message;  // the first failed check, or what passed
  // Kernel exercises: the graded variant's time and the default variant's on one problem
  // (0 when not timed), and the default's name.
  double seconds = 0, reference_seconds = 0;
  std::string reference_variant;
};

struct Exercise {
  std::string id;       // "ex03.1": also the ctest label
  std::string name;     // "div_backward"
  int chapter = 0;
  std::string device;   // where it runs: "cpu" or "cuda" (the emulator when there is no GPU)
  std::string file;     // the file a student fills in
  std::string summary;  // one line: what to write
  std::string op;       // kernel exercises: the registry op the variant is registered under
  Result (*grade)(const std::string& variant) = nullptr;  // null while the exercise is coming
};

// Every exercise, in course order.
const std::vector<Exercise>& all();
// By id ("ex03.1") or name ("div_backward"); throws brrr::Error listing the ids.
const Exercise& find(const std::string& id_or_name);
// Grades one variant: "student", "solution", or for a kernel exercise any other variant
// registered under its op (a teacher's alternative; the course's tests grade planted wrong
// answers this way). Never throws: an error is the Result.
Result grade(const Exercise& exercise, const std::string& variant = "student");

// The graders of ex03.1, ex06.1 and ex18.1, whose answers are functions rather than registered kernels,
// over any implementation: grade() hands them the student's or the solution's functions, the
// course's tests (tests/exercises) planted wrong ones. Never throw, as grade().
using DivFn = Tensor (*)(const Tensor& a, const Tensor& b);
Result grade_div_backward(DivFn div);
using MostFrequentPairFn = std::pair<std::uint32_t, std::uint32_t> (*)(
    const std::vector<std::vector<std::uint32_t>>& words, const std::vector<std::uint64_t>& counts);
using MergePairFn = void (*)(std::vector<std::uint32_t>& word, std::uint32_t a, std::uint32_t b, std::uint32_t id);
Result grade_bpe_merge(MostFrequentPairFn most_frequent_pair, MergePairFn merge_pair);
using Bf16RoundFn = std::uint16_t (*)(float x);
Result grade_bf16_round(Bf16RoundFn rounding);  // ex18.1: the rounding alone (not the matmul it makes)
// Whether this build has the reference solutions (variant "solution").
bool solutions_built();

// The grader of a kernel exercise: the kernel lab checks `variant` of `op` against the CPU
// reference on `device` (throwing the stub's error when it is not written yet, failing with
// the lab's reason otherwise) and times it beside the default variant. `size`: the problem's
// sizes in the lab's order (matmul: M, N, K); empty for the lab's default on `device`. The
// exercises pass small ragged sizes, so a grade takes seconds on the emulator.
Result grade_kernel(const std::string& op, const std::string& variant, lab::LabDevice device,
                    const std::vector<std::int64_t>& size = {});
// Where kernel exercises run: the GPU when there is one, else the SIMT emulator.
lab::LabDevice kernel_device();

}  // namespace brrr::exercises
