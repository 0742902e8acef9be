// tests/core/test_safetensors.cpp: the safetensors reader and writer, good files and bad
// (chapter 08). Every malformed file must give a brrr::Error naming the file and the problem.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>

#include "brrr/brrr.h"
#include "brrr/safetensors.h"

using namespace brrr;

namespace {
std::string dir() {
  const std::string d = std::string(BRRR_BINARY_DIR) + "/test-safetensors";
  std::filesystem::create_directories(d);
  return d;
}

// A file with the given header JSON and `data_bytes` zero bytes of data.
std::string write_raw(const std::string& name, const std::string& json, std::size_t data_bytes) {
  std::string bytes(8, '\0');
  const std::uint64_t n = json.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += json;
  bytes.append(data_bytes, '\0');
  const std::string path = dir() + "/" + name;
  write_file_atomic(path, bytes);
  return path;
}

// Opening `path` must throw a brrr::Error that starts with `prefix` (the file's path and a colon,
// unless given) and names `problem`.
void check_malformed(const std::string& path, const std::string& problem, std::string prefix = "") {
  if (prefix.empty()) prefix = path + ": ";
  CAPTURE(path);
  CAPTURE(problem);
  std::string what;
  try {
    safetensors::File file(path);
  } catch (const Error& e) {
    what = e.what();
  }
  INFO("error: ", what);
  CHECK(what.rfind(prefix, 0) == 0);
  CHECK(what.find(problem) != std::string::npos);
}
}  // namespace

TEST_CASE("safetensors: save and load round-trip every dtype, with metadata") {
  Generator g(1);
  const std::string path = dir() + "/roundtrip.safetensors";
  Tensor f = randn({3, 4}, g), d = randn({5}, g, kFloat64);
  Tensor i = from_vector(std::vector<std::int32_t>{1, -2, 3}, {3}, kInt32);
  Tensor l = from_vector(std::vector<std::int64_t>{1LL << 40}, {1}, kInt64);
  Tensor s = scalar_tensor(2.5);
  safetensors::save(path, {{"f", f.t()}, {"d", d}, {"i", i}, {"l", l}, {"s", s}}, {{"note", "hello"}});
  safetensors::File file(path);
  CHECK(file.metadata().at("note") == "hello");
  CHECK(file.tensors().size() == 5);
  CHECK(file.tensor("f").to_vector<float>() == f.t().contiguous().to_vector<float>());
  CHECK(file.tensor("d").to_vector<double>() == d.to_vector<double>());
  CHECK(file.tensor("i").to_vector<std::int32_t>() == i.to_vector<std::int32_t>());
  CHECK(file.tensor("l").item<std::int64_t>() == (1LL << 40));
  CHECK(file.tensor("s").shape() == Shape{});
  // copy_into converts dtypes and checks shapes
  Tensor target = zeros({5}, kFloat32);
  file.copy_into("d", target);
  CHECK(target.at<float>({2}) == static_cast<float>(d.at<double>({2})));
  CHECK_THROWS_WITH_AS(file.copy_into("f", zeros({3, 4})), doctest::Contains("tensor 'f' has shape (4, 3), expected (3, 4)"), Error);
  CHECK_THROWS_WITH_AS(file.info("nope"), doctest::Contains("no tensor named 'nope'"), Error);
  // a tensor over the mapping can be written without touching the file
  Tensor view = file.tensor("f");
  {
    NoGradGuard no_grad;
    view.fill_(0);
  }
  CHECK(safetensors::File(path).tensor("f").to_vector<float>() == f.t().contiguous().to_vector<float>());
}

TEST_CASE("safetensors: saving over a file replaces it whole") {
  const std::string path = dir() + "/replace.safetensors";
  safetensors::save(path, {{"a", ones({4})}});
  safetensors::save(path, {{"b", zeros({2, 2})}});
  safetensors::File file(path);
  CHECK(file.contains("b"));
  CHECK_FALSE(file.contains("a"));
  CHECK_THROWS_WITH_AS(safetensors::save(path, {{"x", ones({1})}, {"x", ones({1})}}), doctest::Contains("'x' appears twice"), Error);
  CHECK(safetensors::File(path).contains("b"));  // a failed save leaves the old file
}

TEST_CASE("safetensors: malformed files are errors naming the file and the problem") {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK_NOTHROW(safetensors::File(write_raw("ok.safetensors", ok, 8)));

  const std::string tiny = dir() + "/tiny.safetensors";
  write_file_atomic(tiny, "abc");
  check_malformed(tiny, "file is 3 bytes, too short");

  std::string truncated = read_file(write_raw("full.safetensors", ok, 8));
  write_file_atomic(dir() + "/truncated.safetensors", truncated.substr(0, truncated.size() - 3));
  check_malformed(dir() + "/truncated.safetensors", "run past the end of the data (5 bytes)");

  std::string past = std::string(8, '\0');
  const std::uint64_t huge = 1000;
  std::memcpy(past.data(), &huge, 8);
  write_file_atomic(dir() + "/past.safetensors", past + "{}");
  check_malformed(dir() + "/past.safetensors", "header length 1000 runs past the end of the file (10 bytes)");

  check_malformed(write_raw("json.safetensors", R"({"a": {"dtype": )", 0), "malformed JSON header");
  check_malformed(write_raw("array.safetensors", "[1,2]", 0), "header must be a JSON object");
  check_malformed(write_raw("dtype.safetensors", R"({"a":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", 2),
                  "tensor 'a': unknown or unsupported dtype 'F8'");
  check_malformed(write_raw("overlap.safetensors",
                            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                            12),
                  "tensors 'a' [0, 8) and 'b' [4, 12) overlap");
  check_malformed(write_raw("beyond.safetensors", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
                  "data_offsets [0, 16] run past the end of the data (8 bytes)");
  check_malformed(write_raw("size.safetensors", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
                  "shape (3,) of F32 needs 12 bytes, but data_offsets give 8");
  check_malformed(
      write_raw("overflow.safetensors",
                R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
      "more elements than fit in int64");
  check_malformed(write_raw("negative.safetensors", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", 8),
                  "a shape entry must be a non-negative integer, got -1");
  check_malformed(write_raw("reversed.safetensors", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
                  "data_offsets [8, 0] are reversed");
  check_malformed(write_raw("meta.safetensors", R"({"__metadata__":{"a":1}})", 0),
                  "__metadata__ entry 'a' must be a string");
  check_malformed(write_raw("noshape.safetensors", R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", 8),
                  "missing or non-array shape");
  const std::string missing = dir() + "/does-not-exist.safetensors";
  check_malformed(missing, "No such file or directory", "cannot open '" + missing + "': ");
  check_malformed(dir(), "not a regular file", "cannot open '" + dir() + "': ");
}
