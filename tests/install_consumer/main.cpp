// A program built against an installed brrr: trains y = 2x + 1 with autograd and AdamW.
#include <cmath>
#include <cstdio>

#include "brrr/brrr.h"

int main() {
  using namespace brrr;
  Generator gen(0);
  nn::Linear fc(1, 1, gen);
  optim::AdamW opt(fc.parameters(), optim::AdamWOptions(0.1).weight_decay(0.0));
  Tensor x = arange(-1.0, 1.0, 0.1).reshape({-1, 1});
  Tensor y = x * 2.0 + 1.0;
  for (int step = 0; step < 300; ++step) {
    Tensor loss = ops::mean(ops::pow(fc(x) - y, 2.0));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  const double w = fc.weight.item(), b = fc.bias.item();
  std::printf("learned w = %.3f, b = %.3f\n", w, b);
  return std::fabs(w - 2.0) < 0.01 && std::fabs(b - 1.0) < 0.01 ? 0 : 1;
}
