// train/pending.cpp: reading the steps' losses and gradient norms in one copy. Chapter 08
// (training). Read before: pending.h. Read next: report.cpp (what the run prints and draws).
#include "train/pending.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "train/distributed.h"

namespace brrr::train {

void PendingSteps::before_step() {
  if (pending_.empty()) last_read_ = std::chrono::steady_clock::now();
}

void PendingSteps::add(std::int64_t step, double lr, StepOutput out) {
  pending_.push_back({step, lr, std::move(out)});
}

void PendingSteps::read() {
  if (pending_.empty()) return;
  std::vector<Tensor> scalars;
  for (const Pending& p : pending_) {
    for (const Tensor& l : p.out.losses) scalars.push_back(l.reshape({1}).to(kFloat64));
    if (p.out.grad_norm.defined()) scalars.push_back(p.out.grad_norm.reshape({1}).to(kFloat64));
  }
  std::vector<double> values = ops::cat(scalars).to_vector<double>();
  if (ranks_ > 1) {
    // Each rank's share of a step's loss, summed over the ranks (in rank order: the sum one
    // process would take over the same micro-steps). The norm is already the same on every
    // rank: all but rank 0 send 0 for it, which adds nothing.
    if (dist::rank() != 0) {
      std::size_t at = 0;
      for (const Pending& p : pending_) {
        at += p.out.losses.size();
        if (p.out.grad_norm.defined()) values[at++] = 0.0;
      }
    }
    values = dist::sum_over_ranks(values);
  }
  const auto now = std::chrono::steady_clock::now();
  last_ms_ = std::chrono::duration<double, std::milli>(now - last_read_).count() / static_cast<double>(pending_.size());
  std::size_t at = 0;
  for (const Pending& p : pending_) {
    double loss_sum = 0;
    for (std::size_t i = 0; i < p.out.losses.size(); ++i) loss_sum += values[at++];
    const double grad_norm = p.out.grad_norm.defined() ? values[at++] : 0.0;
    if (!std::isfinite(loss_sum))
      detail::fail("the loss is ", std::isnan(loss_sum) ? "NaN" : "infinite", " at step ", p.step,
                   "; stopping. The last good checkpoint is ",
                   result_.last_checkpoint.empty() ? std::string("none (no checkpoint was written yet)")
                                                   : result_.last_checkpoint);
    result_.losses.push_back(loss_sum);
    // One line, newline included, flushed: a reader of the running log (a test, `tail -f`)
    // then sees whole lines only. Left to the stream's 4 KiB buffer, libc++ wrote a full buffer
    // at a time, cutting a line in two (libstdc++ wrote each string whole, but a line's newline
    // could wait for the next write). So: one write(2) a logged step.
    log_ << nlohmann::json{{"event", "step"}, {"step", p.step}, {"loss", loss_sum}, {"lr", p.lr},
                           {"grad_norm", grad_norm}, {"ms", last_ms_}}.dump() + "\n"
         << std::flush;
  }
  pending_.clear();
}

}  // namespace brrr::train
