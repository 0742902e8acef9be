#!/usr/bin/env python3
"""scripts/gpu_report.py OUT_DIR: the report of a scripts/gpu.sh run.

Reads what gpu.sh left in OUT_DIR (steps.tsv, logs/env.log, logs/lab.jsonl, logs/sol.jsonl,
logs/conformance.log and the logs of the benchmarks: peers.log holds PyTorch's lines, step.log,
attention.log and tensor_cores.log brrr's), writes OUT_DIR/report.md (the device, each step's
verdict, the kernel lab's tables, the speed of light beside the lab's times, the conformance
set's verdicts, the bars of the GPU issue with their figures) and prints the bar table last.
Standard library only: it runs on the GPU machine's Python and on the development machine.
"""
import json
import os
import re
import sys


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def lab_rows(logs):
    rows = []
    for line in read(os.path.join(logs, "lab.jsonl")).splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return rows


def lab_tables(rows):
    """One markdown table per op and size, in the order the lab ran them."""
    out, seen = [], []
    for r in rows:
        key = (r["op"], r["size"])
        if key not in seen:
            seen.append(key)
    for op, size in seen:
        group = [r for r in rows if (r["op"], r["size"]) == (op, size)]
        unit = next((r["unit"] for r in group if "unit" in r), "")
        peak = next((r["peak"] for r in group if r.get("peak")), 0)
        out.append(f"\n**{op}** {size}" + (f" (peak {peak:.4g} {unit})" if peak else "") + "\n")
        out.append(f"| variant | median ms | {unit or 'rate'} | % of peak | check |")
        out.append("|---|---:|---:|---:|---|")
        for r in group:
            name = r["variant"] + (" *" if r["default"] else "")
            check = ("ok" if r["passed"] else "FAIL") if r["checked"] else ("FAIL" if not r["passed"] else "-")
            if r["checked"]:
                check += f" {r['max_rel_error']:.1e}"
            if "median_ms" in r:
                pct = f"{r['percent_of_peak']:.1f}" if r["percent_of_peak"] >= 0 else "-"
                out.append(f"| {name} | {r['median_ms']:.4f} | {r['rate']:.4g} | {pct} | {check} |")
            else:
                out.append(f"| {name} | - | - | - | {check} |")
    return "\n".join(out)


class Bars:
    """Each bar: what, the figure, the bar, and met / not met / not measured."""

    def __init__(self):
        self.rows = []

    def add(self, what, figure, bar, met, note=""):
        verdict = "not measured" if met is None else ("met" if met else "NOT met")
        self.rows.append((what, figure, bar, verdict, note))

    def markdown(self):
        lines = ["| bar | figure | needs | verdict |", "|---|---|---|---|"]
        for what, figure, bar, verdict, note in self.rows:
            lines.append(f"| {what} | {figure}{' (' + note + ')' if note else ''} | {bar} | {verdict} |")
        return "\n".join(lines)

    def text(self):
        w = max(len(r[0]) for r in self.rows)
        f = max(len(r[1]) for r in self.rows)
        b = max(len(r[2]) for r in self.rows)
        return "\n".join(f"{r[0]:<{w}}  {r[1]:>{f}}  {r[2]:<{b}}  {r[3]}" for r in self.rows)


def jsonl_rows(path):
    rows = []
    for line in read(path).splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return rows


def speed_of_light(rows, sol, env):
    """The lab's measured times beside the emulator's bound of the same launches (gpu.sh's sol
    step: kernel-lab --mode counters --json, lab/speed_of_light.h), on the chip env.log names."""
    chip = "H200" if "H200" in env else "H100 SXM" if "H100" in env else None
    if not sol:
        return "No bounds (the sol step did not run)."
    if chip is None:
        return "No bounds: the GPU is neither an H100 nor an H200 (lab/speed_of_light.cpp models those two)."
    out = [f"The least time of each launch on the {chip} from the emulator's counts, beside its time in the lab.",
           "", "| op | size | variant | measured ms | bound us (unit) | measured / bound |", "|---|---|---|---|---|---|"]
    for s in sol:
        bound = s.get(f"estimate__bound_us@{chip}")
        if not s.get("ran") or bound is None:
            continue
        timed = [r for r in rows if r.get("op") == s["op"] and r.get("size") == s["size"] and
                 r.get("variant") == s["variant"] and r.get("median_ms")]
        measured = timed[-1]["median_ms"] if timed else None
        ratio = f"{1000 * measured / bound:.2f}" if measured and bound > 0 else "-"
        out.append(f"| {s['op']} | {s['size']} | {s['variant']} | {measured if measured else '-'} | "
                   f"{bound:.3g} ({s.get(f'estimate__bound_unit@{chip}', '?')}) | {ratio} |")
    return "\n".join(out)


def find(rows, op, dims, variant=None):
    """The lab's row of op at dims: the default variant, or the named one."""
    for r in rows:
        if r["op"] == op and r["dims"] == dims and "median_ms" in r:
            if (variant is None and r["default"]) or r["variant"] == variant:
                return r
    return None


def percent_bar(bars, rows, what, op, dims, need, l2_dims=None):
    r = find(rows, op, dims)
    if not r:
        bars.add(what, "-", f">= {need}% of copy", None)
        return
    note = f"'{r['variant']}', {r['rate']:.0f} GB/s"
    small = find(rows, op, l2_dims) if l2_dims else None
    if small:
        note += f"; L2-resident {small['percent_of_peak']:.0f}%"
    bars.add(what, f"{r['percent_of_peak']:.1f}%", f">= {need}% of copy", r["percent_of_peak"] >= need, note)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    logs = os.path.join(out, "logs")
    rows = lab_rows(logs)
    steps = [line.split("\t") for line in read(os.path.join(out, "steps.tsv")).splitlines() if line]
    verdict = {s[0]: s[1] for s in steps}
    bars = Bars()

    # --- bandwidth-bound kernels: percent of the device-to-device copy the lab measures
    n26, n20 = [1 << 26], [1 << 20]
    percent_bar(bars, rows, "GELU forward, n = 2^26", "gelu_forward", n26, 85, n20)
    percent_bar(bars, rows, "GELU backward, n = 2^26", "gelu_backward", n26, 85, n20)
    for C in (384, 768):
        percent_bar(bars, rows, f"LayerNorm forward, N = 65536, C = {C}", "layernorm_forward", [65536, C], 75,
                    [4096, 768] if C == 768 else None)
    for C in (384, 768):
        percent_bar(bars, rows, f"LayerNorm backward, N = 65536, C = {C}", "layernorm_backward", [65536, C], 60,
                    [4096, 768] if C == 768 else None)
    percent_bar(bars, rows, "softmax-cross-entropy, V = 4096 (N = 65536)", "cross_entropy_fused", [65536, 4096], 70,
                [1024, 4096])
    percent_bar(bars, rows, "softmax-cross-entropy, V = 50304 (N = 8192)", "cross_entropy_fused", [8192, 50304], 70)
    percent_bar(bars, rows, "AdamW (one tensor), n = 2^26", "adamw_step", n26, 80, n20)
    percent_bar(bars, rows, "AdamW (multi-tensor), n = 2^26", "adamw_multi_step", n26, 80, n20)

    # --- matmul: the best float32 CUDA-core variant against cuBLAS
    mm = [r for r in rows if r["op"] == "matmul" and r["dims"] == [4096] * 3 and "median_ms" in r and r["passed"]]
    cublas = next((r for r in mm if r["variant"] == "cublas"), None)
    simt = [r for r in mm if r["variant"] not in ("cublas",) and not re.search(r"tf32|wmma|bf16|tensor|mma", r["variant"])]
    if cublas and simt:
        best = max(simt, key=lambda r: r["rate"])
        ratio = best["rate"] / cublas["rate"]
        bars.add("matmul 4096^3, best float32 CUDA-core / cuBLAS SGEMM", f"{100 * ratio:.0f}%", ">= 60%",
                 ratio >= 0.6, f"'{best['variant']}' {best['rate']:.1f} vs {cublas['rate']:.1f} TFLOP/s")
    else:
        bars.add("matmul 4096^3, best float32 CUDA-core / cuBLAS SGEMM", "-", ">= 60%", None)

    # PyTorch's figures: in peers.log (gpu.sh runs the peers first, in a step of their own), or
    # beside brrr's in each benchmark's log (an older run, or bench/*.sh by hand).
    peers = read(os.path.join(logs, "peers.log"))

    # --- tensor cores: bench/tensor_cores.sh (brrr's bf16-in-memory kernels, then PyTorch's)
    tc = read(os.path.join(logs, "tensor_cores.log")) + "\n" + peers
    # the faster of variants 12 (bf16_pipelined) and 13 (bf16_wide, the same kernel with a larger block)
    gemms = re.findall(r"^matmul (bf16_\w+) \(variant (\d+)\).*?4096\^3: ([\d.]+) ms, ([\d.]+) TFLOP/s", tc, re.M)
    gemm = max(gemms, key=lambda g: float(g[3]), default=None)
    peer = re.search(r"^torch \S+ matmul bf16 4096\^3 .*?: ([\d.]+) ms, ([\d.]+) TFLOP/s", tc, re.M)
    if gemm and peer:
        ratio = float(gemm[3]) / float(peer.group(2))
        others = ", ".join(f"variant {g[1]} {float(g[3]):.1f}" for g in gemms if g is not gemm)
        bars.add("bf16 mma.sync GEMM 4096^3 / cuBLAS bf16", f"{100 * ratio:.0f}%", ">= 50%", ratio >= 0.5,
                 f"variant {gemm[1]} ({gemm[0]}) {float(gemm[3]):.1f} vs PyTorch (cuBLAS) {float(peer.group(2)):.1f} "
                 f"TFLOP/s" + (f" ({others})" if others else ""))
    else:
        bars.add("bf16 mma.sync GEMM 4096^3 / cuBLAS bf16", "-", ">= 50%", None)

    # --- attention: bench/attention.sh
    att = read(os.path.join(logs, "attention.log")) + "\n" + peers
    for m in re.finditer(r"T=(\d+) .*?composed ([\d.]+) ms, flash ([\d.]+) ms", att):
        T, composed, flash = m.group(1), float(m.group(2)), float(m.group(3))
        sdpa = re.search(rf"sdpa float32 BH=\d+ T={T} .*?([\d.]+) ms", att)
        note = f"flash {flash:.2f} ms, composed {composed:.2f} ms"
        if sdpa:
            note += f", PyTorch SDPA f32 {float(sdpa.group(1)):.2f} ms"
        bars.add(f"flash attention f32 fwd+bwd vs composed, T = {T}", f"{composed / flash:.2f}x", ">= 3x",
                 composed / flash >= 3, note)
    if not re.search(r"composed [\d.]+ ms, flash", att):
        bars.add("flash attention f32 fwd+bwd vs composed", "-", ">= 3x", None)
    # Variant 4 (mma.sync) and, on sm_90, variant 5 (wgmma, issue 54's bars: forward at or below
    # SDPA's time, forward + backward within 1.2x).
    measured = False
    for m in re.finditer(r"^attention forward (bf16_pipelined|wgmma) .*?BH=(\d+) T=(\d+) hs=(\d+): ([\d.]+) ms.*\n"
                         r"attention backward .*?forward \+ backward ([\d.]+) ms", tc, re.M):
        name, BH, T, hs = m.group(1), m.group(2), m.group(3), m.group(4)
        fwd, both = float(m.group(5)), float(m.group(6))
        key = f"causal BH={BH} T={T} hs={hs}"
        sdpa_fwd = re.search(rf"^torch \S+ sdpa forward bf16 {key} .*?: ([\d.]+) ms", tc, re.M)
        sdpa_both = re.search(rf"^torch \S+ sdpa forward \+ backward bf16 {key} .*?: ([\d.]+) ms", tc, re.M)
        if not (sdpa_fwd and sdpa_both):
            continue
        measured = True
        f_ratio, b_ratio = fwd / float(sdpa_fwd.group(1)), both / float(sdpa_both.group(1))
        label, variant, f_bar, b_bar = ("bf16 flash attention", "variant 4", 1.2, 1.3) if name == "bf16_pipelined" \
            else ("bf16 wgmma flash attention", "variant 5", 1.0, 1.2)
        bars.add(f"{label} forward / SDPA bf16, T = {T}", f"{f_ratio:.2f}x", f"<= {f_bar}x", f_ratio <= f_bar,
                 f"{variant} {fwd:.3f} ms, SDPA {float(sdpa_fwd.group(1)):.3f} ms")
        bars.add(f"{label} fwd+bwd / SDPA bf16, T = {T}", f"{b_ratio:.2f}x", f"<= {b_bar}x", b_ratio <= b_bar,
                 f"{variant} {both:.3f} ms, SDPA {float(sdpa_both.group(1)):.3f} ms")
    if not measured:
        bars.add("bf16 flash attention fwd+bwd / PyTorch SDPA bf16", "-", "<= 1.3x", None)

    # --- the 12.3M GPT: bench/gpu_step.sh
    step = read(os.path.join(logs, "step.log"))
    # A --profile run synchronizes after every op: its step time is not the step's, so its
    # measurement (from its "$ command" line to the next) is left out of the figures.
    step = re.sub(r"^\$ [^\n]*--profile[^\n]*\n(?:(?!\$ )[^\n]*\n?)*", "", step, flags=re.M)
    step_all = step + "\n" + peers + "\n" + read(os.path.join(logs, "llmc.log"))
    # Keyed by who and mode ("brrr kernels, bf16 autocast"), for gpt-12m at B = 64; other presets
    # and batches get their own keys ("brrr gpt2-124m B=16 kernels, bf16 autocast").
    tok, ms, gflops = {}, {}, {}
    for m in re.finditer(r"^brrr (\S+) \(([^)]*)\) B=(\d+) .*?([\d.]+) ms/step, ([\d.]+) tokens/s, ([\d.]+) GFLOP/s",
                         step_all, re.M):
        preset, mode, B = m.group(1), m.group(2), m.group(3)
        key = "brrr " + mode if (preset, B) == ("gpt-12m", "64") else f"brrr {preset} B={B} {mode}"
        tok[key], ms[key], gflops[key] = float(m.group(5)), float(m.group(4)), float(m.group(6))
    for m in re.finditer(r"^torch \S+ (\S+) \(([^)]*)\) B=(\d+) .*?([\d.]+) tokens/s", step_all, re.M):
        preset, mode, B = m.group(1), m.group(2), m.group(3)
        key = "torch " + mode if (preset, B) == ("gpt-12m", "64") else f"torch {preset} B={B} {mode}"
        tok[key] = float(m.group(4))
    # brrr's own kernels ("kernels"; runs before the rename say "fused") against the composed ops
    fused, composed = tok.get("brrr kernels", tok.get("brrr fused")), tok.get("brrr composed")
    if fused and composed:
        bars.add("GPT 12.3M step, kernels / composed tokens/s", f"{fused / composed:.2f}x", ">= 3x",
                 fused / composed >= 3, f"{fused:.0f} vs {composed:.0f} tokens/s")
    else:
        bars.add("GPT 12.3M step, kernels / composed tokens/s", "-", ">= 3x", None)
    def at_least_peer(what, ours, peers, note=""):  # brrr's tokens/s against the fastest of its peers
        if ours and peers:
            best = max(peers)
            bars.add(what, f"{ours / best:.2f}x", ">= 1x", ours >= best, f"{ours:.0f} vs {best:.0f} tokens/s{note}")
        else:
            bars.add(what, "-", ">= 1x", None)

    at_least_peer("GPT 12.3M step, brrr f32 / PyTorch eager f32", fused,
                  [v for k, v in tok.items() if k.startswith("torch eager")], " (faster of eager and eager+SDPA)")
    # brrr's bf16 step: bf16 in memory (bench_gpt_step's default since issue 55: "bf16 activations,
    # bf16 residual"), or, in runs before it, autocast's float32 activations.
    def bf16_key(prefix):
        for mode in ("kernels, bf16 activations, bf16 residual", "kernels, bf16 autocast"):
            if prefix + mode in tok:
                return prefix + mode
        return prefix + "kernels, bf16 autocast"
    bf16 = tok.get(bf16_key("brrr "))
    at_least_peer("GPT 12.3M step, brrr bf16 / torch.compile bf16", bf16,
                  [v for k, v in tok.items() if k.startswith("torch compile") and "bf16" in k])
    if bf16 and composed:
        bars.add("GPT 12.3M step, brrr bf16 / brrr f32 composed", f"{bf16 / composed:.2f}x", ">= 3x",
                 bf16 / composed >= 3, f"{bf16:.0f} vs {composed:.0f} tokens/s")
    else:
        bars.add("GPT 12.3M step, brrr bf16 / brrr f32 composed", "-", ">= 3x", None)
    # llm.c's train_gpt2cu (bench/llmc_step.sh): "llm.c gpt2-124m (bf16) B=16 T=1024: 35.2 ms/step, 466117 tokens/s"
    for m in re.finditer(r"^llm\.c (\S+) \(bf16\) B=(\d+) .*?([\d.]+) ms/step, ([\d.]+) tokens/s", step_all, re.M):
        tok[f"llm.c {m.group(1)} B={m.group(2)}"] = float(m.group(4))
    big = bf16_key("brrr gpt2-124m B=16 ")
    # brrr train replays the step as a graph by default: the faster of the two runs counts.
    ours_gpt2 = max([tok[k] for k in (big, big + ", CUDA graph") if k in tok], default=None)
    cublas_bf16 = re.search(r"^torch \S+ matmul bf16 4096\^3 .*?: [\d.]+ ms, ([\d.]+) TFLOP/s", tc, re.M)
    gpt2_peers = {k: v for k, v in tok.items()
                  if (k.startswith("torch gpt2-124m B=16 compile") and "bf16" in k) or k == "llm.c gpt2-124m B=16"}
    mfu = ""
    if big in gflops and big in tok:
        # Model FLOPs utilisation by brrr's formula (6N + attention, bench/bench_gpt_step.cpp) for
        # each, from its tokens/s: against the H100/H200 datasheet's dense bf16 989 TFLOP/s and
        # against cuBLAS's bf16 GEMM at 4096^3 measured in this run.
        per_token = gflops[big] * 1e9 / tok[big]
        def utilisation(tokens_per_s):
            tflops = tokens_per_s * per_token / 1e12
            text = f"{tflops:.0f} TFLOP/s, {100 * tflops / 989:.0f}% of 989"
            if cublas_bf16:
                text += f", {100 * tflops / float(cublas_bf16.group(1)):.0f}% of cuBLAS's {float(cublas_bf16.group(1)):.0f}"
            return text
        mfu = "; MFU: brrr " + utilisation(ours_gpt2) + "".join(
            f"; {k.split(' gpt2')[0]} {'compile ' if 'compile' in k else ''}{utilisation(v)}" for k, v in gpt2_peers.items())
    at_least_peer("GPT-2 124M step (B = 16), brrr bf16 / the faster of torch.compile bf16 and llm.c", ours_gpt2,
                  list(gpt2_peers.values()), mfu)

    # Same numerics as the peers at GPT-2 124M's body, 50 steps (bench/loss_curves.sh's last line).
    curves = re.search(r"largest difference, brrr bf16 against PyTorch bf16: ([\d.]+)% \(bar 2%\); "
                       r"against brrr float32: ([\d.]+)% \(bar 3%\)", read(os.path.join(logs, "curves.log")))
    if curves:
        peer_pct, f32_pct = float(curves.group(1)), float(curves.group(2))
        bars.add("GPT-2 124M body, 50 steps: brrr bf16 val loss against PyTorch bf16 / brrr float32",
                 f"{peer_pct:.2f}% / {f32_pct:.2f}%", "<= 2% / <= 3%", peer_pct <= 2 and f32_pct <= 3)
    else:
        bars.add("GPT-2 124M body, 50 steps: brrr bf16 val loss against PyTorch bf16 / brrr float32", "-",
                 "<= 2% / <= 3%", None)

    # The GPT-2 step as one CUDA graph: its nodes (kernels, copies, memsets) a layer, as
    # bench_gpt_step --cuda_graph prints them ("graph: 400 nodes a step (...), 33.3 a layer").
    gpt2_graph = re.search(r"^\$ [^\n]*gpt2-124m 16 [^\n]*--cuda_graph[^\n]*\n(?:(?!\$ )[^\n]*\n)*?"
                           r"graph: (\d+) nodes a step[^\n]*?([\d.]+) a layer", step + "\n", re.M)
    if gpt2_graph:
        bars.add("GPT-2 124M bf16 step as one CUDA graph: nodes a layer", gpt2_graph.group(2), "replayed", True,
                 f"{gpt2_graph.group(1)} nodes a step; llm.c's kernels a layer: not measured (no profiler run of its step)")
    else:
        bars.add("GPT-2 124M bf16 step as one CUDA graph: nodes a layer", "-", "replayed", None)

    # --- determinism and graphs
    det = verdict.get("determinism")
    bars.add("training step deterministic on the GPU", det or "-", "identical bits",
             None if det is None else det == "PASS")
    graph, plain = ms.get("brrr kernels, CUDA graph"), ms.get("brrr kernels", ms.get("brrr fused"))
    graph8, plain8 = ms.get("brrr gpt-12m B=8 kernels, CUDA graph"), ms.get("brrr gpt-12m B=8 kernels")
    if graph8 and plain8:
        bars.add("CUDA graph step at B = 8 (launch-bound), plain / graph", f"{plain8 / graph8:.2f}x", "> 1x",
                 plain8 > graph8, f"{graph8:.2f} vs {plain8:.2f} ms/step")
    else:
        bars.add("CUDA graph step at B = 8 (launch-bound), plain / graph", "-", "> 1x", None)
    if graph and plain:
        bars.add("training step as a CUDA graph", f"{graph:.1f} ms", "captured and replayed", True,
                 f"{plain:.1f} ms/step without the graph ({plain / graph:.2f}x)")
    else:
        bars.add("training step as a CUDA graph", "-", "captured and replayed", None)

    # --- the report
    env = read(os.path.join(logs, "env.log")).strip()
    md = ["# brrr on the GPU: scripts/gpu.sh", "", "```", env, "```", "", "## Steps", "",
          "| step | verdict | seconds |", "|---|---|---|"]
    md += [f"| {s[0]} | {s[1]} | {s[2]} |" for s in steps]
    md += ["", "## Bars", "", bars.markdown(), "", "## The kernel lab", "",
           "Median of timed runs with L2 flushed before each; * marks the registry's default variant.",
           lab_tables(rows), "", "## Speed of light (lab/speed_of_light.h)", "",
           speed_of_light(rows, jsonl_rows(os.path.join(logs, "sol.jsonl")), env), "",
           "## Conformance: the emulator against the GPU (brrr conformance)", "", "```",
           read(os.path.join(logs, "conformance.log")).strip() or "(not run)", "```", "",
           "## PyTorch (the peers)", "", "```", peers.strip(), "```", "",
           "## The training step (bench/gpu_step.sh)", "", "```", step.strip(), "```", "",
           "## Attention (bench/attention.sh)", "", "```", read(os.path.join(logs, "attention.log")).strip(), "```", "",
           "## Tensor cores (bench/tensor_cores.sh)", "", "```", read(os.path.join(logs, "tensor_cores.log")).strip(),
           "```", ""]
    with open(os.path.join(out, "report.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md))
    print("\nsteps: " + ", ".join(f"{s[0]} {s[1]}" for s in steps))
    print("\n" + bars.text())


if __name__ == "__main__":
    main()
