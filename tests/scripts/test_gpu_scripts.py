#!/usr/bin/env python3
"""tests/scripts/test_gpu_scripts.py BRRR_CLI: the GPU scripts, checked without a GPU.

scripts/gpu.sh runs only where a GPU is; what can be checked here is checked here:
- gpu_report.py turns a real H100 run (tests/scripts/h100-run: the kernel lab's JSON lines
  and the benchmarks' logs of 2026-11-23) into the bar table with the right verdicts;
- the bars that run had no figures for yet (bf16 GEMM and attention against PyTorch, the bf16
  step against torch.compile, the step as a CUDA graph) are read from log lines in the
  benchmarks' own formats, with the verdicts their bars give;
- gpu.sh refuses bad arguments with a message and exit status 2, and --dry-run prints the
  plan, checks the shared files and prints each part's device call;
- a gpu.sh run leaves exactly report.md, steps.tsv and logs.tgz in OUT_DIR, and one failing
  measurement neither stops the others nor loses their figures (a fake build folder whose
  programs print the benchmarks' lines stands in for the GPU);
- brrr kernel-lab --json writes one parsable object per variant;
- compare_counters.py (gpu.sh's counters step) finds the emulator's counts equal to an ncu CSV
  that holds them, and a sector off is a failure; gpu.sh --dry-run --only counters plans it;
- gpu_report.py sets the emulator's bound of a launch (gpu.sh's sol step) beside the lab's
  time of the same launch, measured / bound.
Exit status 0 when everything holds; each failure is printed.
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL:", what)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def test_report():
    with tempfile.TemporaryDirectory() as out:
        shutil.copytree(os.path.join(HERE, "h100-run"), out, dirs_exist_ok=True)
        r = run([sys.executable, os.path.join(ROOT, "scripts", "gpu_report.py"), out])
        check(r.returncode == 0, f"gpu_report.py exits 0 (got {r.returncode}: {r.stderr})")
        lines = {line.split("  ")[0].strip(): line for line in r.stdout.splitlines() if "  " in line}

        def verdict(bar, figure, expected):
            line = lines.get(bar, "")
            check(figure in line and line.rstrip().endswith(expected),
                  f"bar '{bar}': expected {figure} and '{expected}', got '{line.strip()}'")

        verdict("GELU forward, n = 2^26", "93.1%", "met")
        verdict("LayerNorm backward, N = 65536, C = 768", "92.2%", "met")
        verdict("softmax-cross-entropy, V = 50304 (N = 8192)", "80.4%", "met")
        verdict("AdamW (multi-tensor), n = 2^26", "58.2%", "NOT met")
        verdict("matmul 4096^3, best float32 CUDA-core / cuBLAS SGEMM", "85%", "met")
        verdict("flash attention f32 fwd+bwd vs composed, T = 1024", "1.29x", "NOT met")
        verdict("GPT 12.3M step, kernels / composed tokens/s", "1.54x", "NOT met")
        verdict("GPT 12.3M step, brrr f32 / PyTorch eager f32", "0.86x", "NOT met")
        verdict("training step deterministic on the GPU", "PASS", "met")
        verdict("bf16 mma.sync GEMM 4096^3 / cuBLAS bf16", "-", "not measured")
        check(r.stdout.rstrip().splitlines()[-1].startswith("training step as a CUDA graph"),
              "the bar table is printed last")
        with open(os.path.join(out, "report.md"), encoding="utf-8") as f:
            md = f.read()
        for needle in ("NVIDIA H100 80GB HBM3", "| lab | FAIL | 177 |", "**matmul** M=4096 N=4096 K=4096",
                       "| warptiling | 3.1115 | 44.17 | 85.4 | ok 1.1e-05 |", "brrr gpt-12m (fused)"):
            check(needle in md, f"report.md contains {needle!r}")


def test_gpu_sh():
    gpu_sh = os.path.join(ROOT, "scripts", "gpu.sh")
    with tempfile.TemporaryDirectory() as tmp:
        r = run(["bash", gpu_sh])
        check(r.returncode == 2 and "name the output folder" in r.stderr, f"no OUT_DIR: exit 2 ({r.stderr.strip()})")
        r = run(["bash", gpu_sh, tmp, "--only", "lab,bogus"])
        check(r.returncode == 2 and "unknown step 'bogus'" in r.stderr, f"unknown step: exit 2 ({r.stderr.strip()})")
        r = run(["bash", gpu_sh, tmp, "--frobnicate"])
        check(r.returncode == 2 and "unknown option '--frobnicate'" in r.stderr,
              f"unknown option: exit 2 ({r.stderr.strip()})")
        shared = os.path.join(tmp, "shared")
        os.makedirs(os.path.join(shared, "reference"))
        os.makedirs(os.path.join(shared, "data"))
        r = run(["bash", gpu_sh, os.path.join(tmp, "out"), "--dry-run", "--shared", shared])
        check(r.returncode == 1 and "gpt2_tiny.safetensors is missing" in r.stderr,
              f"--dry-run without the reference file: exit 1 ({r.stderr.strip()})")
        for name in ("reference/gpt2_tiny.safetensors", "data/tinyshakespeare.txt"):
            open(os.path.join(shared, name), "w").close()
        r = run(["bash", gpu_sh, os.path.join(tmp, "out"), "--dry-run", "--shared", shared, "--only", "lab,step"])
        plan = [line.strip() for line in r.stdout.splitlines() if line.startswith("  ") and " " not in line.strip()]
        check(r.returncode == 0 and plan == ["lab", "step"], f"--dry-run --only lab,step plans [lab, step]: {plan}")
        check("brrr kernel-lab matmul --size 4096x4096x4096" in r.stdout, "the plan lists the lab's matmul run")
        r = run(["bash", gpu_sh, tmp, "--part", "3"])
        check(r.returncode == 2 and "--part is 1 or 2" in r.stderr, f"--part 3: exit 2 ({r.stderr.strip()})")
        for part, steps, budget in (
                ("1", ["env", "build", "conformance", "tests", "sanitize", "reference", "train", "determinism", "lab",
                       "sol"], 460),
                ("2", ["env", "build", "peers", "llmc", "step", "curves", "attention", "tensor_cores", "lab_bf16",
                       "racecheck"], 500)):
            r = run(["bash", gpu_sh, os.path.join(tmp, "out"), "--dry-run", "--shared", shared, "--part", part])
            plan = [line.strip() for line in r.stdout.splitlines() if line.startswith("  ") and " " not in line.strip()]
            check(r.returncode == 0 and plan == steps, f"--dry-run --part {part} plans {steps}: {plan}")
            call = f'part {part}: run(command="scripts/gpu.sh \\"$OUT\\" --part {part} --budget {budget}", carry=[".gpu-bundle"], timeout_s=600)'
            check(call in r.stdout, f"--dry-run --part {part} prints the device call {call!r}: {r.stdout}")
            check("files back: $OUT/report.md, $OUT/steps.tsv, $OUT/logs.tgz" in r.stdout,
                  f"--dry-run --part {part} names the files that come back")


# A build folder whose bench_gpt_step prints the benchmark's line, except with --composed,
# where it fails; brrr exists (gpu.sh stops without it) but is not run by the step step.
FAKE_STEP = """#!/bin/sh
case " $* " in *" --composed "*) echo "bench_gpt_step: planted failure" >&2; exit 3 ;; esac
graph=""; case " $* " in *" --cuda_graph "*) graph=", CUDA graph" ;; esac
echo "brrr $1 (kernels$graph) B=$2 T=256 FakeGPU: 50.0 ms/step, 327680 tokens/s, 1000.0 GFLOP/s"
"""


def test_gpu_sh_run():
    gpu_sh = os.path.join(ROOT, "scripts", "gpu.sh")
    with tempfile.TemporaryDirectory() as tmp:
        build, shared, out = (os.path.join(tmp, d) for d in ("build", "shared", "out"))
        os.makedirs(os.path.join(build, "bench"))
        for name, text in (("brrr", "#!/bin/sh\nexit 0\n"), ("bench/bench_gpt_step", FAKE_STEP)):
            with open(os.path.join(build, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(build, name), 0o755)
        for name in ("reference/gpt2_tiny.safetensors", "data/tinyshakespeare.txt"):
            os.makedirs(os.path.dirname(os.path.join(shared, name)), exist_ok=True)
            open(os.path.join(shared, name), "w").close()
        r = run(["bash", gpu_sh, out, "--part", "2", "--only", "step", "--build", build, "--shared", shared,
                 "--budget", "120"])
        check(r.returncode == 1, f"a failed measurement fails the run (exit {r.returncode}): {r.stdout[-500:]}")
        check(sorted(os.listdir(out)) == ["logs.tgz", "report.md", "steps.tsv"],
              f"OUT_DIR holds report.md, steps.tsv and logs.tgz only: {sorted(os.listdir(out))}")
        rows = [line.split("\t") for line in open(os.path.join(out, "steps.tsv")).read().splitlines()]
        verdicts = {row[0]: row[1] for row in rows}
        check(verdicts.get("step/composed") == "FAIL" and verdicts.get("step/kernels") == "PASS"
              and verdicts.get("step/B=8 CUDA graph") == "PASS" and verdicts.get("step") == "FAIL",
              f"each measurement has its verdict, the failure stops nothing after it: {verdicts}")
        with tarfile.open(os.path.join(out, "logs.tgz")) as tar:
            names = tar.getnames()
            log = tar.extractfile("logs/step.log").read().decode()
        check("logs/step.log" in names and "planted failure" in log and "B=8 T=256" in log,
              f"logs.tgz holds the step's log with every measurement: {names}")
        report = open(os.path.join(out, "report.md")).read()
        check("| step/composed | FAIL |" in report and "50.00 vs 50.00 ms/step" in report,
              "report.md shows each measurement's verdict and the B = 8 graph bar's figures")


def test_lab_json(cli):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "lab.jsonl")
        for _ in range(2):  # appended, not overwritten
            r = run([cli, "kernel-lab", "layernorm_forward", "--device", "emulator", "--size", "9x12", "--seed", "3",
                     "--json", path])
            check(r.returncode == 0, f"kernel-lab --json exits 0 ({r.stderr.strip()})")
        rows = [json.loads(line) for line in open(path, encoding="utf-8")]
        variants = {r["variant"] for r in rows}
        check(len(rows) % 2 == 0 and {"naive", "warp", "warp-float4"} <= variants, f"one object per variant: {variants}")
        for row in rows:
            check(row["op"] == "layernorm_forward" and row["dims"] == [9, 12] and row["size"] == "N=9 C=12",
                  f"op and size recorded: {row}")
            if row["variant"] != "student":
                check(row["passed"] and row["checked"] and row["unit"] == "GB/s" and row["median_ms"] > 0,
                      f"a checked, timed variant: {row}")
        r = run([cli, "kernel-lab", "copy", "--device", "emulator", "--size", "8", "--json", tmp])
        check(r.returncode != 0 and "cannot append to --json file" in r.stderr,
              f"--json naming a folder is an error: {r.stderr.strip()}")


# Lines as bench/bench_tensor_cores, bench/tensor_cores_peer.py, bench_gpt_step and
# gpt_step_peer.py print them (the figures are made up: the parsing and the verdicts are tested).
TENSOR_CORES_LOG = """device: NVIDIA H100 80GB HBM3
matmul bf16_pipelined (variant 12) bf16 in, float32 out, 4096^3: 0.3000 ms, 458.13 TFLOP/s
matmul bf16_wide (variant 13) bf16 in, float32 out, 4096^3: 0.2500 ms, 549.76 TFLOP/s
attention forward bf16_pipelined (variant 4) bf16, causal, BH=96 T=1024 hs=64: 0.2500 ms, 77.31 TFLOP/s
attention backward bf16_pipelined (variant 4) bf16 in, float32 gradients: 0.9000 ms; forward + backward 1.1500 ms
attention forward wgmma (variant 5) bf16, causal, BH=96 T=1024 hs=64: 0.2000 ms, 96.64 TFLOP/s
attention backward wgmma (variant 5) bf16 in, float32 gradients: 0.7000 ms; forward + backward 0.9000 ms
torch 2.11.0 matmul bf16 4096^3 NVIDIA H100 80GB HBM3: 0.2000 ms, 687.19 TFLOP/s
torch 2.11.0 sdpa forward bf16 causal BH=96 T=1024 hs=64 NVIDIA H100 80GB HBM3: 0.2200 ms, 87.85 TFLOP/s
torch 2.11.0 sdpa forward + backward bf16 causal BH=96 T=1024 hs=64 NVIDIA H100 80GB HBM3: 0.8000 ms
"""
STEP_LINES = """brrr gpt-12m (kernels, CUDA graph) B=64 T=256 NVIDIA H100 80GB HBM3: 40.0 ms/step, 409600 tokens/s, 31000.0 GFLOP/s
brrr gpt-12m (kernels, bf16 autocast) B=64 T=256 NVIDIA H100 80GB HBM3: 20.0 ms/step, 819200 tokens/s, 62000.0 GFLOP/s
torch 2.11.0 gpt-12m (compile, sdpa, bf16 autocast) B=64 T=256 NVIDIA H100 80GB HBM3: 25.0 ms/step, 655360 tokens/s
$ build-gpu/bench/bench_gpt_step gpt-12m 64 5 --device cuda --profile (limit 60s)
brrr gpt-12m (kernels) B=64 T=256 NVIDIA H100 80GB HBM3: 80.0 ms/step, 204800 tokens/s, 15500.0 GFLOP/s
op                           calls/step        ms/step      us/call    share
linear backward                    25.0         19.007        760.3    41.6%
$ build-gpu/bench/bench_gpt_step gpt-12m 8 20 --device cuda --dtype bf16 (limit 60s)
brrr gpt-12m (kernels, bf16 autocast) B=8 T=256 NVIDIA H100 80GB HBM3: 5.0 ms/step, 409600 tokens/s, 31000.0 GFLOP/s
brrr gpt2-124m (kernels, bf16 activations, bf16 residual) B=16 T=1024 NVIDIA H100 80GB HBM3: 40.0 ms/step, 409600 tokens/s, 350000.0 GFLOP/s
torch 2.11.0 gpt2-124m (compile, sdpa, bf16 autocast) B=16 T=1024 NVIDIA H100 80GB HBM3: 36.0 ms/step, 455111 tokens/s
$ build-gpu/bench/bench_gpt_step gpt2-124m 16 10 --device cuda --dtype bf16 --cuda_graph (limit 120s)
graph: 402 nodes a step (kernels, copies and memsets), 33.5 a layer
brrr gpt2-124m (kernels, bf16 activations, bf16 residual, CUDA graph) B=16 T=1024 NVIDIA H100 80GB HBM3: 38.0 ms/step, 431158 tokens/s, 368000.0 GFLOP/s
"""
# As bench/llmc_step.sh prints llm.c's step (the llmc step's log).
LLMC_LOG = """$ bash bench/llmc_step.sh run build-gpu/llmc build-gpu/brrr tinyshakespeare.txt 16 1024 12 (limit 120s)
llm.c gpt2-124m (bf16) B=16 T=1024: 32.0 ms/step, 512000 tokens/s (median of steps 4-12); llm.c's own MFU 45.0%
"""


def test_report_new_bars():
    with tempfile.TemporaryDirectory() as out:
        shutil.copytree(os.path.join(HERE, "h100-run"), out, dirs_exist_ok=True)
        with open(os.path.join(out, "logs", "tensor_cores.log"), "w", encoding="utf-8") as f:
            f.write(TENSOR_CORES_LOG)
        with open(os.path.join(out, "logs", "step.log"), "a", encoding="utf-8") as f:
            f.write(STEP_LINES)
        with open(os.path.join(out, "logs", "llmc.log"), "w", encoding="utf-8") as f:
            f.write(LLMC_LOG)
        with open(os.path.join(out, "logs", "curves.log"), "w", encoding="utf-8") as f:  # bench/loss_curves.sh's last line
            f.write("largest difference, brrr bf16 against PyTorch bf16: 0.31% (bar 2%); against brrr float32: 0.52% (bar 3%)\n")
        r = run([sys.executable, os.path.join(ROOT, "scripts", "gpu_report.py"), out])
        check(r.returncode == 0, f"gpu_report.py exits 0 (got {r.returncode}: {r.stderr})")
        lines = {line.split("  ")[0].strip(): line for line in r.stdout.splitlines() if "  " in line}
        expected = [
            # the faster of variants 12 and 13: 549.76 of 687.19
            ("bf16 mma.sync GEMM 4096^3 / cuBLAS bf16", "80%", "met"),
            ("bf16 flash attention forward / SDPA bf16, T = 1024", "1.14x", "met"),
            ("bf16 flash attention fwd+bwd / SDPA bf16, T = 1024", "1.44x", "NOT met"),
            # variant 5 (wgmma) against issue 54's bars: forward <= 1x, forward + backward <= 1.2x
            ("bf16 wgmma flash attention forward / SDPA bf16, T = 1024", "0.91x", "met"),
            ("bf16 wgmma flash attention fwd+bwd / SDPA bf16, T = 1024", "1.12x", "met"),
            ("GPT 12.3M step, brrr bf16 / torch.compile bf16", "1.25x", "met"),
            ("training step as a CUDA graph", "40.0 ms", "met"),
            # the new step lines leave the float32 bars as they were, and a --profile run (which
            # synchronizes after every op) is no figure: its 80 ms step would read 0.77x
            ("GPT 12.3M step, kernels / composed tokens/s", "1.54x", "NOT met"),
            # brrr's faster run is the graph's (431158 tokens/s); llm.c (512000) the faster peer;
            # every one's MFU by brrr's FLOPs per token (350000 GFLOP/s over 409600 tokens/s)
            ("GPT-2 124M step (B = 16), brrr bf16 / the faster of torch.compile bf16 and llm.c", "0.84x", "NOT met"),
            ("GPT-2 124M bf16 step as one CUDA graph: nodes a layer", "33.5", "met"),
            ("GPT-2 124M body, 50 steps: brrr bf16 val loss against PyTorch bf16 / brrr float32", "0.31% / 0.52%", "met"),
        ]
        for bar, figure, verdict in expected:
            line = lines.get(bar, "")
            check(figure in line and line.rstrip().endswith(verdict),
                  f"bar '{bar}': expected {figure} and '{verdict}', got '{line.strip()}'")
        report = open(os.path.join(out, "report.md"), encoding="utf-8").read()
        gpt2 = next((line for line in report.splitlines() if "GPT-2 124M step (B = 16)" in line), "")
        for text in ("brrr 368 TFLOP/s, 37% of 989", "llm.c 438 TFLOP/s, 44% of 989", "torch compile 389 TFLOP/s"):
            check(text in gpt2, f"the GPT-2 bar's line gives each one's MFU ({text!r}): '{gpt2.strip()}'")


def test_compare_counters(cli):
    """The emulator's counters of gelu_forward against a stand-in for ncu's CSV of the same launches."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from compare_counters import file_name
    compare = os.path.join(ROOT, "scripts", "compare_counters.py")
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = os.path.join(tmp, "counters.jsonl")
        r = run([cli, "kernel-lab", "gelu_forward", "--device", "emulator", "--mode", "counters", "--size", "4096",
                 "--variant", "float4", "--seed", "1", "--json", jsonl])
        if "has no memory counters" in r.stderr:  # the AddressSanitizer build
            print("SKIPPED: compare_counters.py (no memory counters in this build)")
            return
        check(r.returncode == 0 and "variant float4 by instruction" in r.stdout,
              f"kernel-lab --mode counters --variant float4: exit {r.returncode}, {r.stdout[-400:]} {r.stderr}")
        if r.returncode != 0:
            return
        row = json.loads(open(jsonl).readline())
        check(row["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 512, f"gelu 4096 floats: 512 sectors: {row}")
        ncu = os.path.join(tmp, "ncu")
        os.makedirs(ncu)

        def write_csv(sectors):
            header = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
                      '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n')
            metrics = {m: row[m] for m in row if m.startswith("l1tex__") or m.startswith("smsp__")}
            metrics["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] = sectors
            with open(os.path.join(ncu, file_name(row["op"], row["size"], row["variant"])), "w") as f:
                f.write("==PROF== Connected to process\n" + header)
                for name, value in metrics.items():
                    f.write(f'"0","1","brrr","host","gelu_kernel","1","7","(256, 1, 1)","(4, 1, 1)","0","9.0",'
                            f'"Command line profiler metrics","{name}","","{value:,}"\n')

        write_csv(512)
        r = run([sys.executable, compare, jsonl, ncu])
        check(r.returncode == 0 and "| global ld sectors | 512 | 512 | equal |" in r.stdout,
              f"compare_counters.py, equal counts: exit {r.returncode}, {r.stdout} {r.stderr}")
        write_csv(640)
        r = run([sys.executable, compare, jsonl, ncu])
        check(r.returncode == 1 and "| global ld sectors | 512 | 640 | DIFFERENT |" in r.stdout,
              f"compare_counters.py, a sector count off: exit 1: exit {r.returncode}, {r.stdout}")
        shared = os.path.join(tmp, "shared")
        for name in ("reference/gpt2_tiny.safetensors", "data/tinyshakespeare.txt"):
            os.makedirs(os.path.dirname(os.path.join(shared, name)), exist_ok=True)
            open(os.path.join(shared, name), "w").close()
        r = run(["bash", os.path.join(ROOT, "scripts", "gpu.sh"), os.path.join(tmp, "out"), "--dry-run", "--shared",
                 shared, "--only", "counters"])
        plan = [line.strip() for line in r.stdout.splitlines() if line.startswith("  ") and " " not in line.strip()]
        check(r.returncode == 0 and plan == ["counters"] and "gelu_forward --size 2^20 --mode counters" in r.stdout,
              f"--dry-run --only counters plans [counters] and its runs: {plan} {r.stdout}")


def test_report_speed_of_light(cli):
    """gpu_report.py sets the emulator's bound of a launch beside the lab's time of it: the real
    H100 run's copy of 2^20 floats (0.007168 ms) against 2 x 4 MiB at the H100's 3000 GB/s."""
    with tempfile.TemporaryDirectory() as out:
        shutil.copytree(os.path.join(HERE, "h100-run"), out, dirs_exist_ok=True)
        r = run([cli, "kernel-lab", "copy", "--device", "emulator", "--mode", "counters", "--size", "2^20", "--seed",
                 "1", "--json", os.path.join(out, "logs", "sol.jsonl")])
        if "has no memory counters" in r.stderr:  # the AddressSanitizer build
            print("SKIPPED: the speed of light (no memory counters in this build)")
            return
        check(r.returncode == 0 and "measured / bound 2.56" in r.stdout,
              f"kernel-lab copy --mode counters prints measured / bound: {r.stdout[-600:]} {r.stderr}")
        r = run([sys.executable, os.path.join(ROOT, "scripts", "gpu_report.py"), out])
        report = open(os.path.join(out, "report.md"), encoding="utf-8").read()
        bound_us = 2 * 4 * 2**20 / 3000e9 * 1e6
        row = f"| copy | n=1048576 | simple | 0.007168 | {bound_us:.3g} (DRAM) | {7.168 / bound_us:.2f} |"
        check(r.returncode == 0 and row in report, f"report.md has {row!r}: {report[report.find('## Speed'):][:600]}")


if __name__ == "__main__":
    test_report()
    test_report_new_bars()
    test_gpu_sh()
    test_gpu_sh_run()
    if len(sys.argv) > 1:
        test_lab_json(sys.argv[1])
        test_compare_counters(sys.argv[1])
        test_report_speed_of_light(sys.argv[1])
    print(f"{len(failures)} failure(s)" if failures else "all GPU script checks passed")
    sys.exit(1 if failures else 0)
