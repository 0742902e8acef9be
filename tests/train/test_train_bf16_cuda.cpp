// tests/train/test_train_bf16_cuda.cpp: `brrr train --device cuda --dtype bf16` (chapter 18),
// on the SIMT emulator: a few steps of a tiny GPT in bf16 on the device follow the CPU's bf16
// run, and with autocast off the device's float32 run follows the CPU's float32 run instead.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "brrr/brrr.h"
#include "tests/slow_cpu.h"
#include "train/trainer.h"

using namespace brrr;
namespace fs = std::filesystem;

namespace {

train::TrainConfig tiny(const std::string& name, const std::string& device, const std::string& dtype) {
  const std::string dir = std::string(BRRR_BINARY_DIR) + "/test-train-bf16-cuda/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string text = dir + "/text.txt";
  write_file_atomic(text, read_file(std::string(BRRR_SHARED_DIR) + "/data/tinyshakespeare.txt").substr(0, 20000));
  train::TrainConfig c = train::TrainConfig::from_preset("cpu-tiny");
  c.data = text;
  c.out_dir = dir;
  c.device = device;
  c.dtype = dtype;
  c.n_layer = 1, c.n_head = 2, c.n_embd = 32, c.block_size = 16, c.batch_size = 2;
  // Under BRRR_SLOW_CPU=1 (qemu, tests/slow_cpu.h; 117 s there) the first 3 of the 4 steps: the
  // schedule is the 4 steps', so the runs are the longer ones' beginnings, within their bounds
  // (measured over 3: 9.6e-5 bf16, 0 float32, 1.9e-4 the device's bf16 from its float32).
  c.max_iters = test::sized(4, 3), c.warmup_iters = 1, c.lr_decay_iters = 4, c.eval_interval = 100, c.eval_iters = 1;
  c.log_interval = 100, c.dropout = 0, c.sample_tokens = 0;
  return c;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

// The tolerances: both bf16 runs keep the same bf16 activations in memory and add every sum in
// float32, in another order (the CPU's micro-kernel and attention loops, the tensor cores'
// mma tiles, whose attention also rounds its softmax weights to bf16), so they part by float32
// rounding and that, which can move an activation across a bf16 rounding boundary: measured
// 3.0e-4 over 4 steps (1.3e-5 when only the matmuls' operands were bf16, chapter 18 section
// 4), bounded here by 1e-3. The two float32 runs part by the order of their sums alone
// (measured 4.8e-7, bounded by 1e-5), where the device's bf16 run is 2.0e-4 from its float32
// run. The runs are deterministic, so these figures are the same every time.
// Both devices run attention through the fused kernels (the CPU's default is the composed op,
// whose matmuls autocast rounds too): under bf16 that is attention_*:bf16, variant 3 (tensor
// cores) on the device and the rounded CPU loops, so the comparison covers the bf16 attention.
TEST_CASE("brrr train --device cuda --dtype bf16 (emulator) follows the CPU's bf16 run, and float32 stays float32") {
  cuda::use_emulator();
  struct Reset {
    ~Reset() { kernels::reset_selection(); }
  } reset;
  ops::register_op_variants();  // the framework's op variants (causal_attention) are in the registry
  kernels::select("causal_attention", "flash", DeviceType::CPU);
  const train::TrainResult cpu16 = train::run_training(tiny("cpu-bf16", "cpu", "bf16"));
  const train::TrainResult dev16 = train::run_training(tiny("emu-bf16", "emulator", "bf16"));
  const train::TrainResult cpu32 = train::run_training(tiny("cpu-f32", "cpu", "float32"));
  const train::TrainResult dev32 = train::run_training(tiny("emu-f32", "emulator", "float32"));
  REQUIRE(dev16.losses.size() == static_cast<std::size_t>(test::sized(4, 3)));
  MESSAGE("bf16 cpu-emulator ", max_abs_diff(cpu16.losses, dev16.losses), ", float32 cpu-emulator ",
          max_abs_diff(cpu32.losses, dev32.losses), ", emulator bf16-float32 ", max_abs_diff(dev16.losses, dev32.losses));
  CHECK(max_abs_diff(cpu16.losses, dev16.losses) < 1e-3);
  CHECK(max_abs_diff(cpu32.losses, dev32.losses) < 1e-5);  // autocast off: float32 unchanged
  // The device's bf16 run did round: it is farther from its own float32 run than the two
  // devices' float32 runs are from each other, by far.
  CHECK(max_abs_diff(dev16.losses, dev32.losses) > 20 * max_abs_diff(cpu32.losses, dev32.losses));
}
