// tests/train/test_profile_trace.cpp: the profiler's timeline (brrr/profiler.h), written by
// `brrr train --profile_trace FILE` as a Chrome trace (chapter 08). Checked against the Trace
// Event Format that Perfetto and chrome://tracing read: complete events ("ph": "X") with
// microsecond "ts" and "dur", "pid" and "tid" rows named by metadata ("ph": "M") events.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "brrr/brrr.h"
#include "brrr/profiler.h"
#include "tests/train/train_helpers.h"
#include "train/trainer.h"

using namespace brrr;
using Json = nlohmann::json;

namespace {
std::vector<Json> slices(const Json& trace) {
  std::vector<Json> out;
  for (const Json& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") out.push_back(e);
  return out;
}
bool inside(const Json& inner, const Json& outer) {
  const double a = inner.at("ts").get<double>(), b = a + inner.at("dur").get<double>();
  const double c = outer.at("ts").get<double>(), d = c + outer.at("dur").get<double>();
  return c <= a && b <= d && inner.at("tid") == outer.at("tid");
}
}  // namespace

TEST_CASE("profiler trace: ops inside ops nest, shapes are noted, nothing is kept while off") {
  profiler::reset();
  profiler::trace(true);
  Tensor a = full({3, 4}, 1.0f), b = full({4, 5}, 2.0f);
  ops::matmul(a, b);  // not enabled: not kept
  profiler::enable();
  {
    const profiler::Span span("step 0");
    Tensor x = full({2, 3, 4}, 1.0f, TensorOptions().requires_grad(true));
    Tensor w = full({6, 4}, 0.5f, TensorOptions().requires_grad(true));
    Tensor loss = ops::sum(ops::gelu_composed(ops::linear(x, w, Tensor{})));
    loss.backward();
  }
  profiler::enable(false);
  profiler::trace(false);
  const std::string path = train_test::scratch("test-trace", "unit") + "/trace.json";
  const std::size_t kept = profiler::write_trace(path);
  const Json trace = Json::parse(read_file(path));
  const std::vector<Json> events = slices(trace);
  CHECK(events.size() == kept);
  std::map<std::string, Json> by_name;
  for (const Json& e : events) by_name.emplace(e.at("name").get<std::string>(), e);
  REQUIRE(by_name.count("step 0"));
  REQUIRE(by_name.count("linear"));
  REQUIRE(by_name.count("sum"));
  CHECK(by_name.at("step 0").at("cat") == "step");
  CHECK(by_name.at("linear").at("cat") == "forward");
  CHECK(by_name.at("linear").at("args").at("shapes") == "(2, 3, 4), (6, 4)");
  CHECK(inside(by_name.at("linear"), by_name.at("step 0")));
  // On the CPU the ops an op calls are traced below it (the table counts only the outer one):
  // gelu_composed is made of tanh, mul and add.
  REQUIRE(by_name.count("gelu_composed"));
  CHECK(by_name.at("gelu_composed").at("args").at("shapes") == "(2, 3, 6)");
  std::set<std::string> nested;
  for (const Json& e : events)
    if (e.at("name") != "gelu_composed" && inside(e, by_name.at("gelu_composed"))) nested.insert(e.at("name"));
  CHECK(nested.count("tanh") == 1);
  CHECK(nested.count("step 0") == 0);
  const std::string table = profiler::report();
  CHECK(table.find("gelu_composed") != std::string::npos);
  CHECK(table.find("\ntanh   ") == std::string::npos);  // (its backward, "tanh backward", is a row of its own)
  // Backward closures are "<op> backward"; the ops they call are backward work too.
  bool backward = false, called_by_backward = false;
  for (const Json& e : events)
    if (e.at("cat") == "backward") {
      const std::string name = e.at("name").get<std::string>();
      if (name.ends_with(" backward")) backward = true;
      else called_by_backward = true;
    }
  CHECK(backward);
  CHECK(called_by_backward);  // linear's backward multiplies with matmul
  CHECK(by_name.count("matmul") + by_name.count("linear") >= 1);
  for (const Json& e : events) CHECK(e.at("dur").get<double>() >= 0.0);
  profiler::reset();
}

TEST_CASE("brrr train --profile_trace writes the run as a Chrome trace: steps, forward, backward, optimizer") {
  train::TrainConfig c = train::TrainConfig::from_preset("cpu-tiny");
  c.data = train_test::small_text("test-trace", 40000);
  c.out_dir = train_test::scratch("test-trace", "run");
  c.n_layer = 1, c.n_head = 2, c.n_embd = 32, c.block_size = 16, c.batch_size = 4;
  c.max_iters = 3, c.eval_interval = 2, c.eval_iters = 1, c.log_interval = 100, c.sample_tokens = 0;
  c.profile_trace = c.out_dir + "/trace.json";
  train::run_training(c);
  const Json trace = Json::parse(read_file(c.profile_trace));
  CHECK(trace.at("displayTimeUnit") == "ms");
  std::set<std::string> metadata;
  for (const Json& e : trace.at("traceEvents"))
    if (e.at("ph") == "M") metadata.insert(e.at("name").get<std::string>());
  CHECK(metadata == std::set<std::string>{"process_name", "thread_name"});
  const std::vector<Json> events = slices(trace);
  std::map<std::string, int> per_category;
  std::vector<Json> steps;
  for (const Json& e : events) {
    for (const char* key : {"name", "cat", "ph", "ts", "dur", "pid", "tid"}) CHECK(e.contains(key));
    ++per_category[e.at("cat").get<std::string>()];
    if (e.at("name").get<std::string>().starts_with("step ")) steps.push_back(e);
  }
  REQUIRE(steps.size() == 3);
  CHECK(per_category["forward"] > 0);
  CHECK(per_category["backward"] > 0);
  CHECK(per_category["optimizer"] >= 3);  // one AdamW step per training step
  // Each step's slice holds that step's AdamW step, and the steps follow one another.
  for (const Json& step : steps) {
    int adamw = 0;
    for (const Json& e : events)
      if (e.at("name") == "adamw step" && inside(e, step)) ++adamw;
    CHECK(adamw == 1);
  }
  for (std::size_t i = 1; i < steps.size(); ++i)
    CHECK(steps[i].at("ts").get<double>() >= steps[i - 1].at("ts").get<double>() + steps[i - 1].at("dur").get<double>());

  train::TrainConfig bad = c;
  bad.out_dir = train_test::scratch("test-trace", "bad");
  bad.profile_trace = bad.out_dir + "/no/such/folder/trace.json";
  CHECK_THROWS_WITH_AS(train::run_training(bad), doctest::Contains("does not exist"), brrr::Error);
}
