// apps/brrr/cli_exercises.cpp: `brrr exercises`, where a learner stands on the course's graded
// exercises, and `brrr exercises check EX...`, which grades them (docs/teaching.md).
//
//   brrr exercises                       the table: exercise, chapter, status, time vs default
//   brrr exercises check ex03.1            grade one (exit status 1 unless it passes)
//   brrr exercises check --all --variant solution    grade the reference solutions
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "brrr/error.h"
#include "commands.h"
#include "exercises/grader.h"

namespace brrr::cli {
namespace {

struct ExerciseOptions {
  std::string variant = "student";
  bool tsv = false, files = false, all = false;
  std::vector<std::string> names;
};

std::string milliseconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f ms", seconds * 1e3);
  return text;
}

std::string timing(const exercises::Result& r) {
  if (r.seconds <= 0) return "";
  return milliseconds(r.seconds) + " (" + r.reference_variant + " " + milliseconds(r.reference_seconds) + ")";
}

// One line per exercise, with tabs, for scripts/grade.sh.
void print_tsv(const std::string& variant) {
  std::printf("id\tname\tchapter\tstatus\tseconds\treference_seconds\tmessage\n");
  for (const exercises::Exercise& e : exercises::all()) {
    const exercises::Result r = exercises::grade(e, variant);
    std::string message = r.message;
    for (char& c : message)
      if (c == '\t' || c == '\n') c = ' ';
    std::printf("%s\t%s\t%d\t%s\t%.6f\t%.6f\t%s\n", e.id.c_str(), e.name.c_str(), e.chapter,
                exercises::status_name(r.status), r.seconds, r.reference_seconds, message.c_str());
  }
}

void print_table(const std::string& variant) {
  std::printf("%-30s %-7s %-5s %-12s %-28s %s\n", "exercise", "chapter", "runs", "status", "time (default)", "file");
  std::vector<std::pair<std::string, exercises::Result>> failing;
  int passing = 0, gradable = 0;
  for (const exercises::Exercise& e : exercises::all()) {
    const exercises::Result r = exercises::grade(e, variant);
    std::printf("%-30s %-7.2d %-5s %-12s %-28s %s\n", (e.id + " " + e.name).c_str(), e.chapter, e.device.c_str(),
                exercises::status_name(r.status), timing(r).c_str(), e.grade ? e.file.c_str() : "");
    std::fflush(stdout);
    if (e.grade) gradable++;
    if (r.status == exercises::Status::Passing) passing++;
    if (r.status == exercises::Status::Failing) failing.emplace_back(e.id, r);
  }
  for (const auto& [id, r] : failing) std::printf("\n%s failing: %s\n", id.c_str(), r.message.c_str());
  std::printf("\n%d of %d passing (variant \"%s\"). Grade one with details: brrr exercises check ex03.1\n", passing,
              gradable, variant.c_str());
}

void check(const ExerciseOptions& o) {
  std::vector<const exercises::Exercise*> chosen;
  for (const std::string& name : o.names) chosen.push_back(&exercises::find(name));
  if (o.all)
    for (const exercises::Exercise& e : exercises::all())
      if (e.grade) chosen.push_back(&e);
  BRRR_CHECK(!chosen.empty(), "exercises check: name an exercise (e.g. ex03.1) or pass --all");
  int not_passing = 0;
  for (const exercises::Exercise* e : chosen) {
    const exercises::Result r = exercises::grade(*e, o.variant);
    std::printf("%s %s (chapter %02d, %s): %s\n  %s\n", e->id.c_str(), e->name.c_str(), e->chapter, e->file.c_str(),
                exercises::status_name(r.status), r.message.c_str());
    if (r.seconds > 0)
      std::printf("  time: %s; the default variant, %s: %s\n", milliseconds(r.seconds).c_str(),
                  r.reference_variant.c_str(), milliseconds(r.reference_seconds).c_str());
    std::fflush(stdout);
    if (r.status != exercises::Status::Passing) not_passing++;
  }
  BRRR_CHECK(not_passing == 0, "exercises: ", not_passing, " of ", chosen.size(), " not passing (variant \"",
             o.variant, "\")");
}

}  // namespace

void add_exercise_commands(CLI::App& app) {
  auto o = std::make_shared<ExerciseOptions>();
  CLI::App* cmd = app.add_subcommand("exercises", "The course's graded exercises: where you stand (docs/teaching.md)");
  cmd->add_option("--variant", o->variant, "Grade the \"student\" files or the reference \"solution\"")
      ->check(CLI::IsMember({"student", "solution"}))
      ->capture_default_str();
  cmd->add_flag("--tsv", o->tsv, "One tab-separated line per exercise (for scripts/grade.sh)");
  cmd->add_flag("--files", o->files, "Print the files students fill in, one a line, and stop");
  CLI::App* check_cmd = cmd->add_subcommand("check", "Grade exercises and say why one fails (exit status 1 unless all pass)");
  check_cmd->add_option("exercise", o->names, "Exercise ids or names, e.g. ex03.1 or div_backward");
  check_cmd->add_flag("--all", o->all, "Every exercise that has a grader");
  check_cmd->add_option("--variant", o->variant, "Grade the \"student\" files or the reference \"solution\"")
      ->check(CLI::IsMember({"student", "solution"}));
  check_cmd->callback([o] { check(*o); });
  cmd->callback([o, check_cmd] {
    if (*check_cmd) return;
    if (o->files) {
      std::set<std::string> seen;
      for (const exercises::Exercise& e : exercises::all())
        if (e.grade && seen.insert(e.file).second) std::printf("%s\n", e.file.c_str());
    } else if (o->tsv) {
      print_tsv(o->variant);
    } else {
      print_table(o->variant);
    }
  });
}

}  // namespace brrr::cli
