// train/data_parallel.cpp: the ranks' start-up check, their dropout streams, the fault drill
// and the measurement of communication. Chapter 19 (data parallelism). Read before:
// data_parallel.h. Read next: distributed.cpp (the collectives themselves).
#include "train/data_parallel.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "brrr/io.h"
#include "brrr/tokenizer/shards.h"

namespace brrr::train {

using Json = nlohmann::json;

namespace {
std::string run_identity(const TrainConfig& c) {
  Json j = Json::parse(c.to_json());
  j.erase("threads");  // a rank may use its own number of threads: the results do not depend on it
  j.erase("profile");
  j.erase("profile_trace");
  j["resume"] = c.resume;
  namespace fs = std::filesystem;
  if (fs::is_directory(c.data) || c.data.find_first_of("*?[") != std::string::npos ||
      tokenizer::looks_like_token_file(c.data)) {
    // Shards (data.h): their names and sizes, not their bytes (a corpus may be 40 GB).
    Json shards = Json::array();
    for (const std::string& path : tokenizer::find_shards(c.data))
      shards.push_back({fs::path(path).filename().string(), fs::file_size(path)});
    j["data_shards"] = shards;
    return j.dump();
  }
  std::uint64_t h = 1469598103934665603ull;
  const std::string text = read_file(c.data);
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  j["data_bytes"] = text.size();
  j["data_fnv1a"] = h;
  return j.dump();
}
}  // namespace

void check_ranks_agree(const TrainConfig& c) {
  const std::vector<std::string> all = dist::allgather(run_identity(c));
  const Json reference = Json::parse(all[0]);
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const Json other = Json::parse(all[r]);
    std::string differ;
    for (const auto& [key, value] : reference.items())
      if (!other.contains(key) || other[key] != value)
        differ += (differ.empty() ? "" : ", ") + key + " (" + value.dump() + " on rank 0, " +
                  (other.contains(key) ? other[key].dump() : "nothing") + " on rank " + std::to_string(r) + ")";
    detail::fail("the ranks were started with different settings: ", differ,
                 "; every rank must run the same command on the same data");
  }
}

void give_dropout_its_rank(models::GPT& model, int rank) {
  if (rank == 0) return;
  for (auto& [path, m] : model.named_modules())
    if (auto* d = dynamic_cast<nn::Dropout*>(m.get()))
      d->gen.set_state(d->gen.seed() + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(rank), d->gen.offset());
}

void fault_drill(std::int64_t step) {
  static const char* spec = std::getenv("BRRR_FAULT");
  if (!spec) return;
  const std::string s = spec;
  const std::size_t at = s.find('@'), colon = s.find(':');
  BRRR_CHECK(at != std::string::npos && colon != std::string::npos && colon > at,
             "BRRR_FAULT must be throw@RANK:STEP or kill@RANK:STEP, got '", s, "'");
  if (std::stoi(s.substr(at + 1, colon - at - 1)) != dist::rank() || std::stoll(s.substr(colon + 1)) != step) return;
  if (s.substr(0, at) == "kill") std::raise(SIGKILL);
  detail::fail("BRRR_FAULT: rank ", dist::rank(), " fails at step ", step, " as asked");
}

void StepClock::start() {
  start_ = std::chrono::steady_clock::now();
  communicating_at_start_ = dist::seconds_communicating();
  waiting_at_start_ = dist::seconds_waiting();
}

void StepClock::stop() {
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  communicating_ += dist::seconds_communicating() - communicating_at_start_;
  waiting_ += dist::seconds_waiting() - waiting_at_start_;
}

void StepClock::report(const TrainConfig& c, int ranks, bool zero, const dist::GradientReducer& reducer,
                       std::int64_t steps, std::ofstream& log, TrainResult& result) const {
  if (!dist::collectives_active() || seconds_ <= 0) return;  // several ranks, or BRRR_FORCE_COLLECTIVES
  result.communication_share = communicating_ / seconds_;
  const double per = 1e3 / static_cast<double>(std::max<std::int64_t>(steps, 1));  // ms a step
  const std::size_t buckets = zero ? std::size_t{0} : reducer.buckets();
  std::printf("data parallel: rank 0 spent %.1f%% of the training steps in collectives (%.2f ms a step of %.2f ms) "
              "and %.1f%% waiting for the other ranks; %.1f MB sent; %zu of %zu buckets sent during the backward\n",
              100.0 * result.communication_share, communicating_ * per, seconds_ * per, 100.0 * waiting_ / seconds_,
              static_cast<double>(dist::bytes_sent()) / 1e6, reducer.buckets_sent_during_backward(), buckets);
  log << Json{{"event", "data_parallel"}, {"ranks", ranks}, {"zero", c.zero}, {"communication_share", result.communication_share},
              {"overlap_comm", c.overlap_comm && !zero}, {"buckets", buckets},
              {"buckets_sent_during_backward", reducer.buckets_sent_during_backward()},
              {"waiting_share", waiting_ / seconds_},
              {"communication_in_backward_share",
               (dist::seconds_communicating_in_backward() - in_backward_at_start_) / seconds_},
              {"step_ms", seconds_ * per}, {"optimizer_state_bytes", result.optimizer_state_bytes}}.dump()
      << "\n";
}

}  // namespace brrr::train
