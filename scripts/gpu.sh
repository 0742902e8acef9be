#!/usr/bin/env bash
# scripts/gpu.sh: every GPU check of brrr, in two commands that each fit a lent GPU's 10-minute
# limit and together a session's 15 minutes of device time, on a machine with an NVIDIA GPU.
#
#   scripts/gpu.sh OUT_DIR [--part 1|2] [--only STEP,...] [--skip STEP,...] [--build DIR]
#                  [--shared DIR] [--jobs N] [--budget SECONDS] [--dry-run]
#
# Part 1 (correctness): env, build, conformance, tests, sanitize, reference, train, determinism,
# lab, sol.
# Part 2 (speed beside PyTorch and llm.c): env, build, peers, llmc, step, curves, attention,
# tensor_cores, lab_bf16, racecheck.
# Without --part, every step, in that order, then counters (run it alone: --only counters).
# Each part builds first (a fresh machine has no build; on a warm one the build is a no-op).
# On an H200 (2026-11-27) the steps took: build 75 s, tests 14, sanitize over 150 (racecheck
# was then one of its tools), reference 1, determinism 5, lab 168, peers 134, step 13,
# attention 3, tensor_cores 3, lab_bf16 40, counters 61; so part 1 gets --budget 460 by
# default. Added since, untimed on a GPU: conformance (0.7 s on the emulator of a loaded 2-core
# machine, the GPU's half a few launches more) and sol (11.5 s of CPU there), last in part 1: a
# short budget loses it first; in part 2, llmc (llm.c's build, about a minute of nvcc beside
# brrr's build, then 12 steps), curves (three 50-step GPT-2 runs) and the GPT-2 graph and trace
# in step. Part 2 is issue 55's command (each issue's GPU time is its own 15 minutes): --budget
# 500 by default, under the 9 minutes a command may take, racecheck taking what is left.
#
# What comes back from a lent machine is at most 8 files, so OUT_DIR holds three, refreshed
# after every step and every measurement (a command killed at its limit still returns what ran):
#   report.md    the device, driver and CUDA versions, each step's and each measurement's
#                verdict, the bars with their figures (scripts/gpu_report.py), the lab's tables
#   steps.tsv    step (or step/measurement), verdict, seconds, exit status
#   logs.tgz     every step's full output (logs/STEP.log) and the kernel lab's logs/lab.jsonl
# The logs themselves are kept in BUILD/gpu-part1 (or -part2, -all). Exit status: 0 when every
# step passed (a bar not met is reported, not a failure).
#
# Steps (--only and --skip take a comma-separated list of these):
#   env          what the machine is: GPU, driver, CUDA, compilers, PyTorch
#   build        configure and build (all cores); uses .gpu-bundle (scripts/gpu_bundle.sh) for
#                any library the system lacks
#   conformance  brrr conformance: one small kernel per tensor-core and Hopper instruction form
#                (mma.sync, ldmatrix, cp.async, wgmma and its swizzles, TMA, mbarrier) on the
#                emulator and on the GPU, outputs compared bit for bit (lab/conformance.h); a
#                difference is the emulator's error, listed per case (logs/conformance.txt
#                holds both outputs' words)
#   tests        ctest -L '^cuda$' (the GPU tests)
#   emulator     ctest -L '^emulator$' (no GPU needed; in no part, since CI runs the same tests),
#                started after the build at low priority on half the cores beside the steps
#                that follow, and waited for before part 2's steps
#   sanitize     compute-sanitizer memcheck, synccheck and initcheck over the GPU test program
#                (every kernel variant checked at small, ragged sizes; the GPT), side by side
#   racecheck    compute-sanitizer racecheck over the same program (the slowest tool: last in
#                part 2, with what is left of the budget)
#   reference    brrr verify-reference on the shared reference file, fused and composed
#   train        a short brrr train --device cuda, then brrr sample
#   determinism  the same run twice: bitwise-identical losses and checkpoints
#   lab          brrr kernel-lab, the float32 ops and variants at the bar sizes (and L2-resident
#                ones); large sizes are checked at a smaller size and timed at the bar size
#   sol          the speed of light beside the lab's times: the emulator's counts of some of the
#                lab's launches (sizes it counts in seconds) give each one's least time on the
#                GPU (lab/speed_of_light.h); the report sets measured / bound beside each
#   peers        PyTorch first: the GPT step (eager, SDPA, torch.compile; float32 and bf16; the
#                12.3M GPT and GPT-2 124M), SDPA attention, cuBLAS bf16 and SDPA bf16
#   llmc         llm.c's train_gpt2cu (GPT-2 124M, bf16, batch 16, T 1024) on a token file brrr
#                writes in llm.c's format (bench/llmc_step.sh); built from .gpu-bundle/llm.c
#                (scripts/gpu_bundle.sh) beside brrr's build, in the background
#   step         brrr's GPT step: kernels, composed, CUDA graph (batch 64 and 8), bf16; GPT-2 124M
#   curves       issue 55's numerics at GPT-2 124M's body: 50 steps of brrr float32, brrr bf16 and
#                PyTorch's autocast bf16 from the same weights on the same batches
#                (bench/loss_curves.sh; bars: bf16 within 2% of PyTorch's, 3% of float32's)
#   attention    brrr's flash attention beside composed (float32, T = 256 and 1024)
#   tensor_cores brrr's bf16-in-memory GEMM and flash attention (T = 1024 and 4096): variants 4
#                and, on sm_90, 5 (wgmma), forward and forward + backward, beside peers' SDPA bf16
#   lab_bf16     brrr kernel-lab, the bf16 ops and the convolutions
#   counters     the emulator's memory counters (kernel-lab --mode counters) against Nsight
#                Compute's (ncu) on the same launches: scripts/compare_counters.py
#   decode       issue 56's bars, in no part (its own device time): GPT-2 decoding on the
#                DeviceDecoder at batch 1 and 32 beside transformers' generate, and brrr eval
#                --decoder on the GPU against the CPU (run it alone: --only env,build,decode)
# Each measurement of peers, step, attention and tensor_cores runs on its own (a failure of one
# is its own row in steps.tsv, and the next one still runs).
#
# It expects the CUDA toolkit (nvcc), CMake, ninja, a C++ compiler, compute-sanitizer and a
# python3 with PyTorch; no network. --dry-run checks the bundle and the shared files and prints
# the plan and, for each part, the device call that runs it (command, carry, files back),
# without a GPU. --build reuses a build folder (default build-gpu). --shared names the folder
# with reference/ and data/ (default ../shared, else .gpu-bundle/shared). --budget (default 460
# for part 1, 500 for part 2, 530 otherwise) is the whole run's time: a step gets at most what
# is left, and one that cannot start is reported as not run.
set -uo pipefail

# ---------------------------------------------------------------------------------------------
# The bundle: Debian package files unpacked into a private prefix (also used by gpu_bundle.sh)

# unpack_bundle BUNDLE PREFIX [PACKAGE...]: unpacks the named packages (default: all) of
# BUNDLE/debs into PREFIX, with dpkg-deb where there is one, else with ar and tar.
unpack_bundle() {
  local bundle=$1 prefix=$2
  shift 2
  mkdir -p "$prefix"
  local debs=() p
  if (($#)); then
    for p in "$@"; do debs+=("$bundle"/debs/"${p}"_*.deb); done
  else
    debs=("$bundle"/debs/*.deb)
  fi
  for deb in "${debs[@]}"; do
    [[ -f $deb ]] || { echo "gpu.sh: no package file $deb in the bundle (run scripts/gpu_bundle.sh)" >&2; return 1; }
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$prefix" || return 1
    else
      local tmp
      tmp=$(mktemp -d)
      (cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$prefix") || return 1
      rm -rf "$tmp"
    fi
  done
  # A link to an absolute path (zlib1g-dev's libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13)
  # would leave the prefix for the system's file, which a GPU machine may not have: point it at
  # the prefix's copy.
  local link target
  while IFS= read -r link; do
    target=$(readlink "$link")
    [[ $target == /* && -e $prefix$target ]] && ln -sfn "$(realpath "$prefix$target")" "$link"
  done < <(find "$prefix" -type l)
  return 0
}

# The libraries the build needs, each with a file that shows the system has it.
declare -A system_has=(
  [libeigen3-dev]=/usr/include/eigen3/Eigen/Core
  [libcli11-dev]=/usr/include/CLI/CLI.hpp
  [nlohmann-json3-dev]=/usr/include/nlohmann/json.hpp
  [doctest-dev]=/usr/include/doctest/doctest.h
  [libstb-dev]=/usr/include/stb/stb_image_write.h
  [libpcre2-dev]=/usr/include/pcre2.h
  [zlib1g-dev]=/usr/include/zlib.h
)

# The kernel lab: every op at the bar sizes (issue text), plus an L2-resident size where the
# bar size misses L2. Each run appends to lab.jsonl. A size whose float64 reference would take
# long (matmul at 4096^3, attention at T = 1024) is checked at a smaller size of the same shape
# and timed at the bar size (the case's check_size, lab/cases.h).
lab_runs=(
  "copy --size 2^26" "copy --size 2^20"
  "add --size 2^26"
  "gelu_forward --size 2^26" "gelu_forward --size 2^20"
  "gelu_backward --size 2^26" "gelu_backward --size 2^20"
  "bias_gelu_forward" "bias_gelu_backward"
  "layernorm_forward --size 65536x384 --size 65536x768 --size 4096x768"
  "layernorm_backward --size 65536x384 --size 65536x768 --size 4096x768"
  "residual_layernorm_forward --size 65536x768"
  "softmax_forward"
  "cross_entropy_fused --size 8192x50304 --size 65536x4096 --size 1024x4096"
  "cross_entropy_forward --size 8192x50304"
  "cross_entropy_backward --size 8192x50304"
  "adamw_step --size 2^26 --size 2^20"
  "adamw_multi_step --size 2^26 --size 2^20"
  "matmul --size 4096x4096x4096"
  "attention_forward --size 384x1024x64 --size 384x256x64"
  "attention_backward --size 384x1024x64 --size 384x256x64"
  "sum_dim"
  "embedding_forward"
)
# Part 2's: mixed precision (chapter 18), what autocast runs and the kernels on bf16 data, at the
# tensor-core bars' sizes; and the convolutions (chapter 21).
lab_bf16_runs=(
  "matmul --autocast --size 4096x4096x4096"
  "matmul --dtype bfloat16 --size 4096x4096x4096"
  "attention_forward --autocast --size 96x1024x64" "attention_backward --autocast --size 96x1024x64"
  # (on sm_90 these list attention/wgmma.cu's variant 5 too, written on 2026-11-29, untimed)
  "attention_forward --dtype bfloat16 --size 96x1024x64"
  "attention_backward --dtype bfloat16 --size 96x1024x64"
  # Written on 2026-11-30, untimed: the same kernels on the GPT's packed qkv and (B, T, C) out
  # (chapter 18, section 12), GPT-2's 8 x 12 heads: beside the two lines above, the same work.
  "attention_forward_qkv/bf16 --dtype bfloat16 --size 8x12x1024x64"
  "attention_backward_qkv/bf16 --dtype bfloat16 --size 8x12x1024x64"
  "conv2d_forward --size 32x64x56x56x64x3x1x1x1x1 --size 32x64x56x56x64x3x1x1x1x64"
  "conv2d_backward_input" "conv2d_backward_weight"
  "max_pool2d_forward" "max_pool2d_backward" "avg_pool2d_forward" "avg_pool2d_backward"
  # Untimed until now (the H200 run of 2026-11-27 had none of them): the kernels on bf16 data of
  # chapters 12 and 13, the exact GELU, and matmul's fused epilogue (variant 11).
  "gelu_forward --dtype bfloat16 --size 2^26" "gelu_backward --dtype bfloat16 --size 2^26"
  "bias_gelu_forward --dtype bfloat16" "bias_gelu_backward --dtype bfloat16"
  "layernorm_forward --dtype bfloat16 --size 65536x768" "layernorm_backward --dtype bfloat16 --size 65536x768"
  "cross_entropy_forward --dtype bfloat16 --size 8192x50304" "cross_entropy_backward --dtype bfloat16 --size 8192x50304"
  # Written on 2026-11-29, untimed: the fused classifier on bf16 data (crossentropy.cu variant 5) and
  # the wgmma GEMM's bias + GELU epilogue (matmul/wgmma.cu; registered on sm_90 only).
  "cross_entropy_fused --dtype bfloat16 --size 8192x50304" "matmul_bias_gelu --dtype bfloat16"
  # Written on 2026-11-29, untimed: residual + LayerNorm on bf16 data, forward and backward
  # (residual_layernorm.cu), and AdamW with the global norm's clipping (adamw.cu). Bar: 85% of copy.
  "residual_layernorm_forward --dtype bfloat16 --size 65536x768"
  "residual_layernorm_backward --dtype bfloat16 --size 65536x768"
  "adamw_clipped_multi_step --size 2^26"
  "gelu_erf_forward --size 2^26" "gelu_erf_backward --size 2^26"
  "matmul_bias_gelu"
  # Written on 2026-11-29, untimed: a decoding step's kernels (kernels/cuda/rows/, issue 56) at
  # GPT-2's shapes: c_attn, c_fc, the MLP's c_proj and the head at batch 1, c_fc at batch 8, in
  # float32 and on bf16 weights; the attention over 1024 cached positions at batch 1 and 8, in a
  # float32 and a bf16 cache. Bar: 85% of copy bandwidth.
  "linear_rows/gemv --size 1x2304x768 --size 1x3072x768 --size 1x768x3072 --size 1x50257x768 --size 8x3072x768"
  "linear_rows/gemv/bf16 --dtype bfloat16 --size 1x2304x768 --size 1x3072x768 --size 1x768x3072 --size 1x50257x768 --size 8x3072x768"
  "attend_cache --size 1x12x1024x64 --size 8x12x1024x64"
  "attend_cache --dtype bfloat16 --size 1x12x1024x64 --size 8x12x1024x64"
  # Written on 2026-11-29, untimed: the bf16 step's linear layer as one op (issue 55 item 2):
  # cuBLASLt's GEMM with bias + GELU (pre kept) in its epilogue against the two-pass variant, at
  # GPT-2's c_fc (batch 16, T 1024); the % is of cuBLAS's plain bf16 GEMM's FLOP/s.
  "matmul_epilogue/bf16 --dtype bfloat16 --size 16384x3072x768"
)
# The sol step: launches of lab_runs that the emulator counts in seconds (it counts every access
# of every lane), whose bounds the report sets beside the lab's times of the same launches.
sol_runs=("copy --size 2^20" "gelu_forward --size 2^20" "gelu_backward --size 2^20" "adamw_step --size 2^20")
# The counters step: the emulator's memory counters (kernels/cuda/simt_counters.h) and ncu's on the
# same launches (the lab's sizes and its 256-byte-aligned buffers), at the GPU bars' ops scaled
# down (the emulator counts every access of every lane).
counters_runs=(
  "gelu_forward --size 2^20" "gelu_backward --size 2^20"
  "layernorm_forward --size 256x768" "layernorm_backward --size 256x768"
  "cross_entropy_fused --size 64x4096"
  "adamw_step --size 2^20" "adamw_multi_step --size 2^20" "adamw_clipped_multi_step --size 2^20"
  "linear_rows/gemv --size 1x96x1024" "attend_cache --size 2x2x512x64"
)
counters_metrics=l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
counters_metrics+=,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
counters_metrics+=,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum
counters_metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
counters_metrics+=,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
counters_metrics+=,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
# Sourced (gpu_bundle.sh --check, bench/lab_references.sh): the functions and lists above only.
if [[ ${BRRR_GPU_SH_SOURCED:-0} == 1 ]]; then return 0; fi

cd "$(dirname "$0")/.."
root=$PWD

# ---------------------------------------------------------------------------------------------
# Arguments

part1_steps=(env build conformance tests sanitize reference train determinism lab sol)
part2_steps=(env build peers llmc step curves attention tensor_cores lab_bf16 racecheck)
all_steps=(env build conformance tests emulator sanitize reference train determinism lab sol peers llmc step curves
           attention tensor_cores lab_bf16 racecheck counters decode)
script_args=("$@")  # run_step runs each step as this script again, under `timeout`
out="" part="" only="" skip="" build=build-gpu shared="" jobs=$(nproc) dry_run=0 budget=""
while (($#)); do
  case $1 in
    --part) part=${2:-}; shift ;;
    --only) only=${2:-}; shift ;;
    --skip) skip=${2:-}; shift ;;
    --build) build=${2:-}; shift ;;
    --shared) shared=${2:-}; shift ;;
    --jobs) jobs=${2:-}; shift ;;
    --budget) budget=${2:-}; shift ;;
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,76p' "$0"; exit 0 ;;
    -*) echo "gpu.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    *) [[ -z $out ]] || { echo "gpu.sh: one output folder, not '$out' and '$1'" >&2; exit 2; }; out=$1 ;;
  esac
  shift
done
[[ -n $out ]] || { echo "gpu.sh: name the output folder: scripts/gpu.sh OUT_DIR (try --help)" >&2; exit 2; }
[[ -z $part || $part == 1 || $part == 2 ]] || { echo "gpu.sh: --part is 1 or 2, not '$part'" >&2; exit 2; }
part_budget() { case $1 in 1) echo 460 ;; 2) echo 500 ;; *) echo 530 ;; esac; }
[[ -n $budget ]] || budget=$(part_budget "$part")
[[ $budget =~ ^[0-9]+$ ]] || { echo "gpu.sh: --budget is a number of seconds, not '$budget'" >&2; exit 2; }
for list in "$only" "$skip"; do
  for s in ${list//,/ }; do
    [[ " ${all_steps[*]} " == *" $s "* ]] || { echo "gpu.sh: unknown step '$s' (steps: ${all_steps[*]})" >&2; exit 2; }
  done
done
case $part in
  1) steps=("${part1_steps[@]}") ;;
  2) steps=("${part2_steps[@]}") ;;
  *) steps=("${all_steps[@]}") ;;
esac
wanted() {  # wanted STEP: in this part, in --only (when given) and not in --skip
  [[ " ${steps[*]} " == *" $1 "* ]] && [[ -z $only || ",$only," == *",$1,"* ]] && [[ ",$skip," != *",$1,"* ]]
}
if [[ -z $shared ]]; then
  if [[ -f ../shared/reference/gpt2_tiny.safetensors ]]; then shared=$(cd ../shared && pwd)
  else shared=$root/.gpu-bundle/shared; fi
fi
shared=$(cd "$shared" 2>/dev/null && pwd) || { echo "gpu.sh: no shared folder '$shared'" >&2; exit 2; }
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
# The logs live in the build folder, not in OUT_DIR: OUT_DIR gets the three files above.
work=$root/$build/gpu-part${part:-s}
[[ $build == /* ]] && work=$build/gpu-part${part:-s}
logs=$work/logs
python=$(command -v python3 || true)
export PYTHON=$python PYTHONUNBUFFERED=1
# A leftover BRRR_CUDA_EMULATOR=1 would turn every --device cuda below into the emulator.
unset BRRR_CUDA_EMULATOR BRRR_KERNELS

# ---------------------------------------------------------------------------------------------
# What comes back: OUT_DIR/report.md, steps.tsv and logs.tgz, refreshed after every step and
# measurement. Each is written beside its final name and renamed, so a kill leaves the last
# complete copy.

publish() {
  [[ -d $logs ]] || return 0
  "$python" "$root/scripts/gpu_report.py" "$work" >/dev/null 2>&1 || echo "gpu.sh: gpu_report.py failed" >&2
  [[ -f $work/report.md ]] && cp "$work/report.md" "$work/.report.md.copy" && mv -f "$work/.report.md.copy" "$out/report.md"
  cp "$work/steps.tsv" "$out/.steps.tsv.tmp" && mv -f "$out/.steps.tsv.tmp" "$out/steps.tsv"
  tar -czf "$work/.logs.tgz" -C "$work" logs && mv -f "$work/.logs.tgz" "$out/logs.tgz"
}

# ---------------------------------------------------------------------------------------------
# Steps: each runs under a time limit, its output in logs/STEP.log, its verdict in steps.tsv

failed=0
started=$(date +%s)
verdict_of() {  # verdict_of EXIT_STATUS
  case $1 in 0) echo PASS ;; 77) echo SKIP ;; 124|137) echo TIMEOUT ;; *) echo FAIL ;; esac
}
# run_step NAME SECONDS FUNCTION: PASS (exit 0), FAIL, TIMEOUT or SKIP (exit 77); the limit
# is cut to what is left of the budget (less 10 s for the report).
run_step() {
  local name=$1 limit=$2
  shift 2
  local t0 rc verdict left
  t0=$(date +%s)
  left=$((budget - 10 - (t0 - started)))
  if ((left < 15)); then
    printf '%s\t%s\t%s\t%s\n' "$name" "NOT RUN" 0 "-" >>"$work/steps.tsv"
    printf '== %-12s not run: the budget of %ss is spent\n' "$name" "$budget"
    failed=1
    publish
    return
  fi
  ((limit > left)) && limit=$left
  printf '== %-12s (limit %ss, at +%ss)\n' "$name" "$limit" $((t0 - started))
  # `timeout` runs programs, not shell functions: the step runs as this script again, which
  # calls the function named in BRRR_GPU_STEP (see below) with the same settings.
  timeout --kill-after=10 "$limit" env BRRR_GPU_STEP="$1" BRRR_GPU_STARTED="$started" \
    bash "$root/scripts/gpu.sh" "${script_args[@]}" >"$logs/$name.log" 2>&1
  rc=$?
  verdict=$(verdict_of $rc)
  [[ $verdict == PASS || $verdict == SKIP ]] || failed=1
  printf '%s\t%s\t%s\t%s\n' "$name" "$verdict" $(($(date +%s) - t0)) "$rc" >>"$work/steps.tsv"
  printf '   %s in %ss%s\n' "$verdict" $(($(date +%s) - t0)) "$([[ $verdict == FAIL ]] && echo " (exit $rc): $(tail -n 3 "$logs/$name.log" | tr '\n' ' ' | cut -c1-300)")"
  publish
}

# measure NAME SECONDS COMMAND...: one measurement inside a step, on its own: its output goes to
# the step's log, its verdict is a row "STEP/NAME" of steps.tsv, and a failure or a timeout
# does not stop the step (it returns 1 at the end, measure_status). The limit is cut to what is
# left of the budget.
measure_failed=0
measure() {
  local name=$1 limit=$2
  shift 2
  local t0 rc left
  t0=$(date +%s)
  left=$((budget - 15 - (t0 - ${BRRR_GPU_STARTED:-$started})))
  ((limit > left)) && limit=$left
  if ((limit < 5)); then
    printf '%s/%s\t%s\t%s\t%s\n' "$BRRR_GPU_STEP_NAME" "$name" "NOT RUN" 0 "-" >>"$work/steps.tsv"
    measure_failed=1
    return
  fi
  echo "\$ $* (limit ${limit}s)"
  timeout --kill-after=5 "$limit" "$@" 2>&1
  rc=$?
  printf '%s/%s\t%s\t%s\t%s\n' "$BRRR_GPU_STEP_NAME" "$name" "$(verdict_of $rc)" $(($(date +%s) - t0)) "$rc" \
    >>"$work/steps.tsv"
  ((rc == 0)) || measure_failed=1
  publish
}
measure_status() { return $measure_failed; }

brrr=$build/brrr
reference=$shared/reference/gpt2_tiny.safetensors
corpus=$shared/data/tinyshakespeare.txt

step_env() {
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(hostname), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), kernel $(uname -r)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.max.sm,clocks.max.mem,power.limit \
      --format=csv,noheader | sed 's/^/gpu: /'
    nvidia-smi | sed -n '1,4p' | grep -o 'CUDA Version: [0-9.]*' | sed 's/^/driver supports /'
  else
    echo "gpu: none (no nvidia-smi)"
  fi
  echo "nvcc: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*' || echo 'not found')"
  echo "cmake: $(cmake --version | head -1)"
  echo "ninja: $(ninja --version 2>/dev/null || echo 'not found')"
  echo "c++: $(c++ --version | head -1)"
  echo "compute-sanitizer: $(compute-sanitizer --version 2>/dev/null | grep -i version | head -1 || echo 'not found')"
  echo "python: $python $("$python" --version 2>&1)"
  "$python" -c 'import torch; print("torch:", torch.__version__, "cuda", torch.version.cuda, "|", torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")' 2>&1
  echo "brrr: $(git -C "$root" rev-parse --short HEAD 2>/dev/null)$(git -C "$root" status --porcelain 2>/dev/null | grep -q . && echo ' (with local changes)')"
  echo "part: ${part:-all}, budget ${budget}s"
}

cuda_arch() {  # "90" for compute capability 9.0
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .'
}

step_build() {
  local arch prefix_args=() from_bundle=()
  arch=$(cuda_arch)
  [[ -n $arch ]] || { echo "no GPU: nvidia-smi reports no compute capability"; return 1; }
  for p in "${!system_has[@]}"; do
    [[ -f ${system_has[$p]} ]] || from_bundle+=("$p")
  done
  if ((${#from_bundle[@]})); then
    # PCRE2's -dev package links to the runtime library of its own package, zlib's likewise.
    [[ " ${from_bundle[*]} " == *" libpcre2-dev "* ]] && from_bundle+=(libpcre2-8-0)
    [[ " ${from_bundle[*]} " == *" zlib1g-dev "* ]] && from_bundle+=(zlib1g)
    echo "from .gpu-bundle (the system lacks them): ${from_bundle[*]}"
    unpack_bundle "$root/.gpu-bundle" "$build/prefix" "${from_bundle[@]}" || return 1
    prefix_args=(-DCMAKE_PREFIX_PATH="$(realpath "$build/prefix/usr")")
  else
    echo "every library from the system"
  fi
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRRR_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" -DBRRR_SHARED_DIR="$shared" -DBRRR_TEST_PYTHON="$python" \
    "${prefix_args[@]}" || return 1
  cmake --build "$build" -j "$jobs" -- -k 0  # every error at once, not the first
}

# The conformance set: seconds (33 one-block kernels, each also on the emulator). Its limit is
# small so that a hang cannot eat part 1's budget.
step_conformance() {
  "$brrr" conformance --out "$logs/conformance.txt"
}

step_tests() {
  # Exact labels: -L takes a regular expression, and `cuda` alone would also match others.
  (cd "$build" && ctest -L '^cuda$' --output-on-failure --timeout 240)
}

# The emulator tests need no GPU: they run at low priority on half the cores, beside the rest of
# part 1 (the lab times the GPU's kernels with CUDA events, which CPU load does not move), and are
# waited for at its end, within the budget.
emulator_pid=""
start_emulator_tests() {
  local left=$((budget - 30 - ($(date +%s) - started)))
  ((left > 60)) || return 0
  (cd "$build" && timeout "$left" nice ctest -L '^emulator$' --output-on-failure -j $((jobs > 2 ? jobs / 2 : 1))) \
    >"$logs/emulator.log" 2>&1 &
  emulator_pid=$!
}
finish_emulator_tests() {
  [[ -n $emulator_pid ]] || return 0
  local t0=$(date +%s) rc verdict
  wait "$emulator_pid"
  rc=$?
  verdict=$(verdict_of $rc)
  [[ $verdict == PASS ]] || failed=1
  printf '%s\t%s\t%s\t%s\n' emulator "$verdict" "(waited $(($(date +%s) - t0)))" "$rc" >>"$work/steps.tsv"
  printf '== emulator     %s (ctest -L ^emulator$, beside the steps above)\n' "$verdict"
  emulator_pid=""
  publish
}

# sanitize_with TOOL...: every kernel variant at small, ragged sizes (the lab's check), the GPU
# memory tests and the GPT on the GPU, under each tool; the tools run side by side.
sanitize_with() {
  local tools=("$@") pids=() rc=0 i
  local test_program=$build/tests/cuda/test_gpu
  for tool in "${tools[@]}"; do
    # (No --leak-check: the caching allocator keeps its blocks until exit by design.)
    # Left out: the out-of-memory case (its failed cudaMalloc is the point of it, and the
    # sanitizer would report it as an API error) and the determinism case (ten training steps,
    # slow under the tools, and the same kernels as the GPT case).
    compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
      "$test_program" --no-version --test-case-exclude="out of memory*,training steps are deterministic*" \
      >"$logs/sanitize-$tool.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!tools[@]}"; do
    if wait "${pids[$i]}"; then
      echo "${tools[$i]}: clean ($(grep -m1 'ERROR SUMMARY' "$logs/sanitize-${tools[$i]}.log"))"
    else
      rc=1
      echo "${tools[$i]}: FAILED ($(grep -m1 'ERROR SUMMARY' "$logs/sanitize-${tools[$i]}.log"))"
      grep -m 30 -E '^=========|\[doctest\]|ERROR' "$logs/sanitize-${tools[$i]}.log"
    fi
  done
  return $rc
}
step_sanitize() { sanitize_with memcheck synccheck initcheck; }
# racecheck is the slow one: beside the other three on an H200 (2026-11-27) it had finished 2 of
# the 6 test cases when the 150 s limit struck, while the others were done. So it is a step of its
# own, last in part 2, with what is left of the budget.
step_racecheck() { sanitize_with racecheck; }

step_reference() {
  "$brrr" verify-reference "$reference" --device cuda && "$brrr" verify-reference "$reference" --device cuda --composed
}

step_train() {
  rm -rf "$build/gpu-train"
  "$brrr" train --preset shakespeare-char --device cuda --data "$corpus" --max_iters 300 --eval_interval 150 \
    --eval_iters 20 --out_dir "$build/gpu-train" || return 1
  "$brrr" sample --checkpoint "$build/gpu-train" --prompt "ROMEO:" --max_new_tokens 200 --stats
}

step_determinism() {
  # The GPU test (losses of five steps, twice), then the same short training run twice, in the
  # same folder (the checkpoint records its out_dir): the logged losses and the checkpoints
  # (parameters, AdamW's moments, the step, the random states) must be the same bytes.
  (cd "$build" && ctest -R "deterministic" -L '^cuda$' --output-on-failure) || return 1
  local run=$build/gpu-det
  for copy in a b; do
    rm -rf "$run"
    "$brrr" train --preset shakespeare-char --device cuda --data "$corpus" --max_iters 30 --eval_interval 30 \
      --eval_iters 2 --sample_tokens 0 --seed 7 --out_dir "$run" >"$run.log" 2>&1 || { cat "$run.log"; return 1; }
    # The step times differ from run to run; everything else in the log must not.
    sed -E 's/"ms":[0-9.eE+-]+,?//' "$run/log.jsonl" >"$run-$copy.losses"
    cp "$(ls "$run"/ckpt-*.safetensors | tail -1)" "$run-$copy.safetensors"
  done
  echo "last logged step: $(grep '"event":"step"' "$run-a.losses" | tail -1)"
  echo "checkpoints: $(sha256sum "$run-a.safetensors" | cut -c1-16) $(sha256sum "$run-b.safetensors" | cut -c1-16)"
  cmp "$run-a.losses" "$run-b.losses" && echo "logged losses identical" || { echo "logged losses DIFFER"; return 1; }
  cmp "$run-a.safetensors" "$run-b.safetensors" && echo "checkpoints identical" || { echo "checkpoints DIFFER"; return 1; }
}

run_lab() {  # run_lab RUN...: each run on its own (one op's failure does not stop the others)
  local run
  for run in "$@"; do
    # shellcheck disable=SC2086  # the options are words; the step's name: the op and its flags
    measure "${run%% --size*}" 150 "$brrr" kernel-lab $run --device cuda --seed 1 --json "$logs/lab.jsonl"
    echo
  done
  measure_status
}
step_lab() {
  rm -f "$logs/lab.jsonl"
  run_lab "${lab_runs[@]}"
}
# The emulator's counts of sol_runs, each launch's bound on the H100 SXM and the H200 in its JSON
# (estimate__bound_us@CHIP), beside the lab step's lab.jsonl (scripts/gpu_report.py joins them).
step_sol() {
  rm -f "$logs/sol.jsonl"
  local run
  for run in "${sol_runs[@]}"; do
    # shellcheck disable=SC2086  # the options are words
    measure "${run%% --size*}" 60 "$brrr" kernel-lab $run --device emulator --mode counters --seed 1 \
      --json "$logs/sol.jsonl"
  done
  measure_status
}
step_lab_bf16() {
  run_lab "${lab_bf16_runs[@]}"
}

# The counters: the emulator's for each run, then ncu's for each variant the emulator counted
# (one ncu run each: the variant's launches, summed), compared by scripts/compare_counters.py.
step_counters() {
  command -v ncu >/dev/null || { echo "counters: no ncu (Nsight Compute) on this machine"; return 77; }
  rm -rf "$logs/ncu" "$logs/counters.jsonl"
  mkdir -p "$logs/ncu"
  local run op dims variant file
  for run in "${counters_runs[@]}"; do
    # shellcheck disable=SC2086  # the options are words
    measure "${run%% *} emulator" 90 "$brrr" kernel-lab $run --device emulator --mode counters --seed 1 \
      --json "$logs/counters.jsonl"
  done
  while IFS=$'\t' read -r op dims variant file; do
    measure "$op $variant ncu" 90 ncu --csv --print-units base --metrics "$counters_metrics" \
      --log-file "$logs/ncu/$file" "$brrr" kernel-lab "$op" --device cuda --mode check --variant "$variant" \
      --size "$dims" --seed 1
  done < <("$python" -c 'import json, sys
sys.path.insert(0, sys.argv[2])
from compare_counters import file_name
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["ran"]:
        print(r["op"], "x".join(map(str, r["dims"])), r["variant"], file_name(r["op"], r["size"], r["variant"]), sep="\t")
' "$logs/counters.jsonl" "$root/scripts")
  measure "compare" 30 "$python" "$root/scripts/compare_counters.py" "$logs/counters.jsonl" "$logs/ncu" \
    --out "$logs/counters.md"
  measure_status
}

# The benchmarks beside PyTorch (chapter 17): the peers first, so that a failing brrr kernel
# cannot cost the comparison its other half. The same commands as bench/gpu_step.sh,
# bench/attention.sh and bench/tensor_cores.sh, each on its own.
step_peers() {
  local peer=bench/gpt_step_peer.py
  # The bars' peers first (eager and SDPA float32, cuBLAS and SDPA bf16), torch.compile last: it
  # spends tens of seconds compiling before it measures, and a short budget should lose it first.
  measure "eager f32" 120 "$python" $peer gpt-12m 64 20 --device cuda
  measure "eager sdpa f32" 120 "$python" $peer gpt-12m 64 20 --device cuda --sdpa
  measure "cublas bf16, sdpa bf16" 120 "$python" bench/tensor_cores_peer.py --gemm 4096 --attention 1024 96 64 \
    --attention 4096 96 64
  measure "sdpa T=256 T=1024" 120 bash -c "'$python' bench/attention_peer.py 256 384 64 20 &&
    '$python' bench/attention_peer.py 1024 384 64 20"
  measure "compile bf16" 180 "$python" $peer gpt-12m 64 20 --device cuda --sdpa --compile --dtype bf16
  measure "compile f32" 180 "$python" $peer gpt-12m 64 20 --device cuda --sdpa --compile
  measure "compile bf16 gpt2-124m" 180 "$python" $peer gpt2-124m 16 10 --device cuda --sdpa --compile --dtype bf16
  measure_status
}
# Issue 56's bars (its own device time, not part 1's or 2's): `scripts/gpu.sh OUT --only env,build,decode
# --budget 520`. GPT-2 124M decoding on the DeviceDecoder (bench/bench_decode_gpu.cpp) at batch 1 and
# 32 beside transformers' generate in bf16 with a static cache and torch.compile
# (bench/decode_gpu_peer.py); then brrr eval --decoder on the GPU against the CPU on a Hugging Face
# folder made by transformers (tests/models/hf_fixtures.py); the sampling kernel's time; brrr serve
# --device cuda at 1 and 8 clients (tests/serve/load_test.py). Bars: batch 1 at 1.5x the peer's
# tokens/s and 70% of the floor; batch 32 at 10x batch 1; the two losses within 1e-5; serve at 8 clients 4x one.
step_decode() {
  local b=$build/bench/bench_decode_gpu batch
  for batch in 1 32; do
    measure "peer bf16 b$batch" 150 "$python" bench/decode_gpu_peer.py gpt2 200 $batch bf16
    measure "brrr bf16 b$batch" 60 "$b" gpt2 200 $batch bf16
    measure "brrr f32 b$batch" 60 "$b" gpt2 200 $batch float32
  done
  # A prefill's linear_rows: 512 rows at GPT-2's c_attn and the MLP's c_proj, each variant (the
  # default by_rows takes the tiles there; split_k is the GEMV the prefill used before): FLOP/s.
  measure "prefill linear_rows" 90 "$brrr" kernel-lab linear_rows --device cuda --seed 1 --size 512x2304x768 \
    --size 512x768x3072
  measure "prefill linear_rows bf16" 90 "$brrr" kernel-lab linear_rows/bf16 --dtype bfloat16 --device cuda --seed 1 \
    --size 512x2304x768 --size 512x768x3072
  # The sampled step's draw (kernels/cuda/rows/sample.cu) at GPT-2's padded vocabulary, 1 and 32 rows.
  measure "sample_rows" 60 "$brrr" kernel-lab sample_rows --device cuda --seed 1 --size 1,50304 --size 32,50304
  # brrr serve on the GPU, GPT-2 124M's shape: 8 concurrent clients' tokens/s over one client's (bar 4x).
  measure "serve 1,8" 120 bash -c "'$python' bench/gpt2_hf_folder.py '$build/gpu-hf/gpt2' '$corpus' &&
    '$python' tests/serve/load_test.py '$brrr' '$build/gpu-hf/gpt2' --measure 1,8 --seconds 8 --slots 32 --device cuda"
  measure "eval cpu=cuda" 90 bash -c "'$python' tests/models/hf_fixtures.py '$build/gpu-hf' '$corpus' >/dev/null &&
    head -c 20000 '$corpus' >'$build/gpu-hf/eval.txt' &&
    '$brrr' eval --decoder --checkpoint '$build/gpu-hf/tied' --data '$build/gpu-hf/eval.txt' | tail -1 &&
    '$brrr' eval --decoder --device cuda --checkpoint '$build/gpu-hf/tied' --data '$build/gpu-hf/eval.txt' | tail -1"
  measure_status
}
# llm.c's step (issue 55's third peer). Its build (one nvcc compile of train_gpt2.cu, about a
# minute) starts beside brrr's build (start_llmc_build) and is waited for here; its outcome is
# in logs/llmc-build.log.
start_llmc_build() {
  [[ -f $root/.gpu-bundle/llm.c/train_gpt2.cu ]] || return 0
  (nice bash "$root/bench/llmc_step.sh" build "$root/.gpu-bundle/llm.c" "$build/llmc" >"$logs/llmc-build.log" 2>&1
   echo $? >"$work/llmc-build.rc") &
}
step_llmc() {
  [[ -f $root/.gpu-bundle/llm.c/train_gpt2.cu ]] ||
    { echo "no .gpu-bundle/llm.c: scripts/gpu_bundle.sh puts llm.c's source there"; return 1; }
  while [[ ! -f $work/llmc-build.rc ]]; do sleep 1; done
  [[ $(cat "$work/llmc-build.rc") == 0 ]] || { echo "llm.c's build failed:"; tail -20 "$logs/llmc-build.log"; return 1; }
  measure "llm.c gpt2-124m bf16" 120 bash "$root/bench/llmc_step.sh" run "$build/llmc" "$brrr" "$corpus" 16 1024 12
  measure_status
}
step_step() {
  local b=$build/bench/bench_gpt_step
  measure "kernels" 90 "$b" gpt-12m 64 20 --device cuda
  measure "composed" 90 "$b" gpt-12m 64 20 --device cuda --composed
  measure "CUDA graph" 90 "$b" gpt-12m 64 20 --device cuda --cuda_graph
  measure "bf16" 90 "$b" gpt-12m 64 20 --device cuda --dtype bf16
  measure "B=8" 60 "$b" gpt-12m 8 20 --device cuda
  measure "B=8 CUDA graph" 60 "$b" gpt-12m 8 20 --device cuda --cuda_graph
  measure "gpt2-124m bf16" 120 "$b" gpt2-124m 16 10 --device cuda --dtype bf16
  # Issue 55's GPT-2 bars: the step as one graph (its node count a layer, beside llm.c's) and one
  # step's Chrome trace (op by op, synchronised; logs/gpt2-step-trace.json in logs.tgz).
  measure "gpt2-124m bf16 CUDA graph" 120 "$b" gpt2-124m 16 10 --device cuda --dtype bf16 --cuda_graph
  measure "gpt2-124m bf16 trace" 90 "$b" gpt2-124m 16 2 --device cuda --dtype bf16 --trace "$logs/gpt2-step-trace.json"
  # Where brrr's step spends its time, op by op (the profiler synchronizes after each op).
  measure "profile" 60 "$b" gpt-12m 64 5 --device cuda --profile
  measure "profile bf16" 60 "$b" gpt-12m 64 5 --device cuda --dtype bf16 --profile
  measure_status
}
step_curves() {
  rm -rf "$build/gpu-curves"
  DEVICE=cuda SIZE=gpt2 STEPS=50 PEER_PYTHON="$python" DATA="$corpus" \
    bash "$root/bench/loss_curves.sh" "$build" "$build/gpu-curves"
}
step_attention() {
  measure "T=256" 60 "$build/bench/bench_attention" 256 384 64 20
  measure "T=1024" 90 "$build/bench/bench_attention" 1024 384 64 20
  measure_status
}
step_tensor_cores() {
  measure "gemm, attention" 150 "$build/bench/bench_tensor_cores" --gemm 4096 --attention 1024 96 64 \
    --attention 4096 96 64
  measure_status
}

# ---------------------------------------------------------------------------------------------
# One step, as run_step runs it; the plan; or the run

if [[ -n ${BRRR_GPU_STEP:-} ]]; then
  BRRR_GPU_STEP_NAME=${BRRR_GPU_STEP#step_}
  "$BRRR_GPU_STEP"
  exit
fi

# The device call for one part, as the device tool takes it (its README): the command runs in
# the checkout's root, $OUT is the folder whose files come back, .gpu-bundle is git-ignored and
# travels only when carried.
print_device_call() {  # print_device_call PART
  echo "part $1: run(command=\"scripts/gpu.sh \\\"\$OUT\\\" --part $1 --budget $(part_budget "$1")\", carry=[\".gpu-bundle\"], timeout_s=600)"
  echo "  files back: \$OUT/report.md, \$OUT/steps.tsv, \$OUT/logs.tgz"
}

if ((dry_run)); then
  echo "gpu.sh --dry-run: the plan (part ${part:-1 and 2}; output in $out)"
  for s in "${all_steps[@]}"; do wanted "$s" && echo "  $s"; done
  echo "shared folder: $shared"
  for f in "$reference" "$corpus"; do
    [[ -f $f ]] || { echo "gpu.sh: $f is missing" >&2; exit 1; }
  done
  if [[ -f .gpu-bundle/MANIFEST ]]; then
    (cd .gpu-bundle && grep -v '^#' MANIFEST | sha256sum --check --quiet) ||
      { echo "gpu.sh: .gpu-bundle does not match its MANIFEST (rerun scripts/gpu_bundle.sh)" >&2; exit 1; }
    echo "bundle: $(grep -c debs/ .gpu-bundle/MANIFEST) packages, checksums ok"
    for p in "${!system_has[@]}"; do
      ls .gpu-bundle/debs/"${p}"_*.deb >/dev/null 2>&1 || { echo "gpu.sh: the bundle lacks $p" >&2; exit 1; }
    done
  else
    echo "bundle: none (scripts/gpu_bundle.sh makes it); the system must have every library"
  fi
  if wanted llmc; then
    if [[ -f .gpu-bundle/llm.c/COMMIT ]]; then
      echo "llm.c: .gpu-bundle/llm.c at $(cut -c1-7 .gpu-bundle/llm.c/COMMIT) (bench/llmc_step.sh builds it there)"
    else
      echo "llm.c: none in .gpu-bundle, so the llmc step fails (scripts/gpu_bundle.sh fetches it; LLMC_GIT names a clone)"
    fi
  fi
  if wanted lab; then
    echo "the kernel lab's runs (part 1):"
    printf '  brrr kernel-lab %s\n' "${lab_runs[@]}"
  fi
  if wanted sol; then
    echo "the speed-of-light runs (part 1, on the emulator, beside the lab's times):"
    printf '  brrr kernel-lab %s --device emulator --mode counters\n' "${sol_runs[@]}"
  fi
  if wanted lab_bf16; then
    echo "the kernel lab's runs (part 2):"
    printf '  brrr kernel-lab %s\n' "${lab_bf16_runs[@]}"
  fi
  if wanted counters; then
    echo "the counters' runs (each on the emulator, then each variant under ncu --metrics $counters_metrics):"
    printf '  brrr kernel-lab %s --mode counters\n' "${counters_runs[@]}"
    echo "  then scripts/compare_counters.py (requests, sectors and ideal wavefronts equal; conflicts reported)"
  fi
  echo "the device calls (one per part, each under its 600 s limit):"
  if [[ -n $part ]]; then print_device_call "$part"; else print_device_call 1; print_device_call 2; fi
  if [[ -z $part ]] && wanted counters; then
    echo "counters: run(command=\"scripts/gpu.sh \\\"\$OUT\\\" --only env,build,counters --budget $budget\", carry=[\".gpu-bundle\"], timeout_s=600)"
  fi
  if [[ -z $part ]] && wanted decode; then
    echo "decode (issue 56): run(command=\"scripts/gpu.sh \\\"\$OUT\\\" --only env,build,decode --budget 520\", carry=[\".gpu-bundle\"], timeout_s=600)"
  fi
  command -v nvidia-smi >/dev/null && echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" ||
    echo "GPU: none here (the run needs one)"
  exit 0
fi

echo "gpu.sh: part ${part:-1 and 2}, output in $out (logs in $work)"
rm -rf "$work"
mkdir -p "$logs" || exit 2
: >"$work/steps.tsv"
rm -f "$out/report.md" "$out/steps.tsv" "$out/logs.tgz"
wanted env && { step_env | tee "$logs/env.log"; publish; }
wanted llmc && start_llmc_build
wanted build && run_step build 300 step_build
if [[ ! -x $brrr ]]; then
  echo "gpu.sh: no $brrr (the build failed or was skipped); stopping"
  failed=1
else
  wanted emulator && start_emulator_tests
  wanted conformance && run_step conformance 60 step_conformance
  wanted tests && run_step tests 240 step_tests
  wanted sanitize && run_step sanitize 150 step_sanitize
  wanted reference && run_step reference 90 step_reference
  wanted train && run_step train 150 step_train
  wanted determinism && run_step determinism 150 step_determinism
  wanted lab && run_step lab 400 step_lab
  wanted sol && run_step sol 90 step_sol
  finish_emulator_tests
  wanted peers && run_step peers 400 step_peers
  wanted llmc && run_step llmc 200 step_llmc
  wanted step && run_step step 300 step_step
  wanted curves && run_step curves 200 step_curves
  wanted attention && run_step attention 150 step_attention
  wanted tensor_cores && run_step tensor_cores 150 step_tensor_cores
  wanted lab_bf16 && run_step lab_bf16 300 step_lab_bf16
  wanted racecheck && run_step racecheck 400 step_racecheck
  wanted counters && run_step counters 400 step_counters
  wanted decode && run_step decode 500 step_decode
fi
echo "gpu.sh: done in $(($(date +%s) - started)) s"
publish
"$python" "$root/scripts/gpu_report.py" "$work" | tail -n 40 || failed=1
exit $failed
