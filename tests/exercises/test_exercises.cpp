// tests/exercises/test_exercises.cpp: the course's own checks of its exercises (label
// `course`; docs/teaching.md). They guard the course repository, not a student's work:
//   - every exercise's stub fails loudly, with the exercise's id and name ("not started");
//   - every reference solution (variant "solution") passes its grader, so each exercise can
//     be passed and its grader is right;
//   - `brrr exercises` and `brrr exercises check` say the same;
//   - (test_wrong_answers.cpp) every grader fails a complete but wrong answer.
// The stub check runs where the reference solutions are built (the course repository, not a
// class's handout). In such a checkout, once you fill in an exercise it fails by design:
// grade your own work with `ctest -L exercise` (or -L ex03.1), and leave this out with -LE course.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <memory>
#include <string>

#include "brrr/error.h"
#include "brrr/kernels.h"
#include "exercises/grader.h"
#include "lab/kernel_lab.h"
#include "tests/skip.h"

using namespace brrr;

namespace {

// Runs a command, returns its exit status and what it printed (stdout and stderr).
std::pair<int, std::string> run(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace

TEST_CASE("every exercise's stub fails loudly with its id and name") {
  // A class's handout: the stubs are the students' now.
  if (!exercises::solutions_built()) return test::skip("no reference solutions in this build: the stubs are not checked");
  int graded = 0;
  for (const exercises::Exercise& e : exercises::all()) {
    if (!e.grade) continue;
    graded++;
    CAPTURE(e.id);
    const exercises::Result r = exercises::grade(e, "student");
    INFO("exercise ", e.id, " is no longer the stub: this check guards the course's handout; "
         "grade your own work with ctest -L exercise");
    CHECK(r.status == exercises::Status::NotStarted);
    CHECK(r.message.find("exercise " + e.id + " (") != std::string::npos);
    CHECK(r.message.find("not written yet") != std::string::npos);
  }
  CHECK(graded >= 3);
}

TEST_CASE("every reference solution passes its grader") {
  if (!exercises::solutions_built()) return test::skip("no reference solutions in this build (exercises/solutions is not there)");
  for (const exercises::Exercise& e : exercises::all()) {
    if (!e.grade) continue;
    CAPTURE(e.id);
    const exercises::Result r = exercises::grade(e, "solution");
    INFO(r.message);
    CHECK(r.status == exercises::Status::Passing);
    if (!e.op.empty()) CHECK(r.seconds > 0);  // kernel exercises are timed against the default
  }
}

TEST_CASE("the exercise table: in the course's order, each id its chapter and place, every graded one in ctest") {
  const std::string ctest_ids = BRRR_GRADED_EXERCISES;  // the list in tests/exercises/CMakeLists.txt
  std::string graded;
  int chapter = 0, place = 0;
  for (const exercises::Exercise& e : exercises::all()) {
    CHECK(e.chapter >= chapter);  // the order the course reads them
    place = e.chapter == chapter ? place + 1 : 1;
    chapter = e.chapter;
    char expected[32];  // room for any two ints: g++ 13's -Wformat-truncation checks that
    std::snprintf(expected, sizeof expected, "ex%02d.%d", chapter, place);  // ex12.2: chapter 12's second
    CHECK(e.id == expected);
    CHECK(e.chapter > 0);
    CHECK(&exercises::find(e.name) == &e);
    if (e.grade) graded += (graded.empty() ? "" : " ") + e.id;
  }
  CHECK(graded == ctest_ids);
  CHECK_THROWS_WITH_AS(exercises::find("ex99"), doctest::Contains("exercises: ex03.1 div_backward"), Error);
  // A grader leaves the kernel selection as it found it.
  const std::string before = kernels::selected("matmul", DeviceType::CPU, kFloat32);
  exercises::grade(exercises::find("ex04.1"), "student");
  CHECK(kernels::selected("matmul", DeviceType::CPU, kFloat32) == before);
}

TEST_CASE("brrr exercises prints the table and check grades") {
  auto [status, table] = run(std::string(BRRR_CLI) + " exercises");
  CHECK(status == 0);
  CHECK(table.find("ex03.1 div_backward") != std::string::npos);
  CHECK(table.find("not started") != std::string::npos);
  CHECK(table.find("ex16.2 adamw_step") != std::string::npos);  // the CUDA exercises, chapters 12-16

  auto [check_status, check] = run(std::string(BRRR_CLI) + " exercises check ex06.1");
  CHECK(check_status == 1);
  CHECK(check.find("exercise ex06.1 (bpe_merge): not written yet") != std::string::npos);

  auto [files_status, files] = run(std::string(BRRR_CLI) + " exercises --files");
  CHECK(files_status == 0);
  CHECK(files.find("exercises/student/bpe_merge.cpp\n") != std::string::npos);

  if (exercises::solutions_built()) {
    auto [ok_status, ok] = run(std::string(BRRR_CLI) + " exercises check div_backward --variant solution");
    INFO(ok);
    CHECK(ok_status == 0);
    CHECK(ok.find("passing") != std::string::npos);
  }
}

TEST_CASE("grade_kernel, the grader of the kernel exercises, checks one variant through the kernel lab") {
  // The path of the CUDA exercises (ex12.1-ex16.2), run here on the CPU matmul variants.
  CHECK_THROWS_WITH_AS(exercises::grade_kernel("matmul", "student", lab::LabDevice::CPU),
                       doctest::Contains("exercise ex04.1 (matmul_tiled): not written yet"), Error);
  if (!exercises::solutions_built()) return test::skip("no reference solutions in this build");
  const exercises::Result r = exercises::grade_kernel("matmul", "solution", lab::LabDevice::CPU);
  INFO(r.message);
  CHECK(r.status == exercises::Status::Passing);
  CHECK(r.message.find("agrees with the CPU reference on cpu") != std::string::npos);
  CHECK(r.seconds > 0);
  CHECK(r.reference_seconds > 0);
  CHECK(r.reference_variant == kernels::selected("matmul", DeviceType::CPU, kFloat32));
}

