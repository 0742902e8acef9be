#!/usr/bin/env bash
# scripts/gpu.sh: every GPU check of brrr in one command, on a machine with an NVIDIA GPU.
#
#   scripts/gpu.sh OUT_DIR [--only STEP,...] [--skip STEP,...] [--build DIR] [--shared DIR]
#                  [--jobs N] [--budget SECONDS] [--dry-run]
#
# It builds brrr for this GPU's architecture only, runs the GPU tests, the sanitizers, the
# reference check, a short training run, the determinism check, the kernel lab at the bar
# sizes and the benchmarks beside PyTorch, and writes into OUT_DIR:
#   report.md    the device, driver and CUDA versions, each step's verdict, the lab's tables,
#                each bar with its figure and met / not met (scripts/gpu_report.py)
#   logs/        every step's full output; lab.jsonl, the kernel lab's figures
# and prints the bar table last. Exit status: 0 when every step passed (a bar not met is
# reported, not a failure).
#
# Steps, in order (--only and --skip take a comma-separated list of these):
#   env          what the machine is: GPU, driver, CUDA, compilers, PyTorch
#   build        configure and build (all cores); uses .gpu-bundle (scripts/gpu_bundle.sh) for
#                any library the system lacks
#   tests        ctest -L cuda (the GPU tests); the emulator tests run beside the next steps
#   sanitize     compute-sanitizer memcheck, racecheck, synccheck and initcheck over the GPU
#                test program (every kernel variant checked at small, ragged sizes; the GPT)
#   reference    brrr verify-reference on the shared reference file, fused and composed
#   train        a short brrr train --device cuda, then brrr sample
#   determinism  the same run twice: bitwise-identical losses and checkpoints
#   lab          brrr kernel-lab, every op and variant at the bar sizes (and L2-resident ones)
#   step         bench/gpu_step.sh: the 12.3M GPT's training step beside PyTorch
#   attention    bench/attention.sh: flash attention beside composed and PyTorch's SDPA
#   tensor_cores bench/tensor_cores.sh: the bf16-in-memory kernels (matmul variant 12, attention
#                variant 4) beside cuBLAS and PyTorch's bf16 SDPA at T = 1024 and 4096
#
# It expects the CUDA toolkit (nvcc), CMake, ninja, a C++ compiler, compute-sanitizer and a
# python3 with PyTorch; no network. --dry-run checks the bundle and prints the plan without a
# GPU. --build reuses a build folder (default build-gpu). --shared names the folder with
# reference/ and data/ (default ../shared, else .gpu-bundle/shared). --budget (default 590)
# is the whole run's time: a step gets at most what is left, and one that cannot start is
# reported as not run, so the report is always written.
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
}

# The libraries the build needs, each with a file that shows the system has it.
declare -A system_has=(
  [libeigen3-dev]=/usr/include/eigen3/Eigen/Core
  [libcli11-dev]=/usr/include/CLI/CLI.hpp
  [nlohmann-json3-dev]=/usr/include/nlohmann/json.hpp
  [doctest-dev]=/usr/include/doctest/doctest.h
  [libstb-dev]=/usr/include/stb/stb_image_write.h
  [libpcre2-dev]=/usr/include/pcre2.h
)

if [[ ${BRRR_GPU_SH_SOURCED:-0} == 1 ]]; then return 0; fi  # gpu_bundle.sh --check

cd "$(dirname "$0")/.."
root=$PWD

# ---------------------------------------------------------------------------------------------
# Arguments

all_steps=(env build tests sanitize reference train determinism lab step attention tensor_cores)
script_args=("$@")  # run_step runs each step as this script again, under `timeout`
out="" only="" skip="" build=build-gpu shared="" jobs=$(nproc) dry_run=0 budget=590
while (($#)); do
  case $1 in
    --only) only=$2; shift ;;
    --skip) skip=$2; shift ;;
    --build) build=$2; shift ;;
    --shared) shared=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --budget) budget=$2; shift ;;
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    -*) echo "gpu.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    *) [[ -z $out ]] || { echo "gpu.sh: one output folder, not '$out' and '$1'" >&2; exit 2; }; out=$1 ;;
  esac
  shift
done
[[ -n $out ]] || { echo "gpu.sh: name the output folder: scripts/gpu.sh OUT_DIR (try --help)" >&2; exit 2; }
for list in "$only" "$skip"; do
  for s in ${list//,/ }; do
    [[ " ${all_steps[*]} " == *" $s "* ]] || { echo "gpu.sh: unknown step '$s' (steps: ${all_steps[*]})" >&2; exit 2; }
  done
done
wanted() {  # wanted STEP: in --only (when given) and not in --skip
  [[ -z $only || ",$only," == *",$1,"* ]] && [[ ",$skip," != *",$1,"* ]]
}
if [[ -z $shared ]]; then
  if [[ -f ../shared/reference/gpt2_tiny.safetensors ]]; then shared=$(cd ../shared && pwd)
  else shared=$root/.gpu-bundle/shared; fi
fi
shared=$(cd "$shared" 2>/dev/null && pwd) || { echo "gpu.sh: no shared folder '$shared'" >&2; exit 2; }
mkdir -p "$out/logs" || exit 2
out=$(cd "$out" && pwd)
logs=$out/logs
python=$(command -v python3 || true)
export PYTHON=$python PYTHONUNBUFFERED=1
# A leftover BRRR_CUDA_EMULATOR=1 would turn every --device cuda below into the emulator.
unset BRRR_CUDA_EMULATOR BRRR_KERNELS

# ---------------------------------------------------------------------------------------------
# Steps: each runs under a time limit, its output in logs/STEP.log, its verdict in steps.tsv

failed=0
started=$(date +%s)
# run_step NAME SECONDS COMMAND...: PASS (exit 0), FAIL, TIMEOUT or SKIP (exit 77); the limit
# is cut to what is left of the budget (less 10 s for the report).
run_step() {
  local name=$1 limit=$2
  shift 2
  local t0 rc verdict left
  t0=$(date +%s)
  left=$((budget - 10 - (t0 - started)))
  if ((left < 15)); then
    printf '%s\t%s\t%s\t%s\n' "$name" "NOT RUN" 0 "-" >>"$out/steps.tsv"
    printf '== %-12s not run: the budget of %ss is spent\n' "$name" "$budget"
    failed=1
    return
  fi
  ((limit > left)) && limit=$left
  printf '== %-12s (limit %ss, at +%ss)\n' "$name" "$limit" $((t0 - started))
  # `timeout` runs programs, not shell functions: the step runs as this script again, which
  # calls the function named in BRRR_GPU_STEP (see below) with the same settings.
  timeout --kill-after=10 "$limit" env BRRR_GPU_STEP="$1" bash "$root/scripts/gpu.sh" "${script_args[@]}" \
    >"$logs/$name.log" 2>&1
  rc=$?
  case $rc in
    0) verdict=PASS ;;
    77) verdict=SKIP ;;
    124|137) verdict=TIMEOUT ;;
    *) verdict=FAIL ;;
  esac
  [[ $verdict == PASS || $verdict == SKIP ]] || failed=1
  printf '%s\t%s\t%s\t%s\n' "$name" "$verdict" $(($(date +%s) - t0)) "$rc" >>"$out/steps.tsv"
  printf '   %s in %ss%s\n' "$verdict" $(($(date +%s) - t0)) "$([[ $verdict == FAIL ]] && echo " (exit $rc): $(tail -n 3 "$logs/$name.log" | tr '\n' ' ' | cut -c1-300)")"
}

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
    # PCRE2's -dev package links to the runtime library of its own package.
    [[ " ${from_bundle[*]} " == *" libpcre2-dev "* ]] && from_bundle+=(libpcre2-8-0)
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

step_tests() {
  (cd "$build" && ctest -L cuda --output-on-failure --timeout 300)
}

# The emulator tests need no GPU: they run on the CPU cores beside the GPU steps that are not
# timed (sanitize, reference, train), and are waited for before the timed ones.
emulator_pid=""
start_emulator_tests() {
  (cd "$build" && timeout 420 ctest -L emulator --output-on-failure -j $((jobs > 4 ? jobs - 4 : 1))) \
    >"$logs/emulator.log" 2>&1 &
  emulator_pid=$!
}
finish_emulator_tests() {
  [[ -n $emulator_pid ]] || return 0
  local t0=$(date +%s) rc verdict
  wait "$emulator_pid"
  rc=$?
  case $rc in 0) verdict=PASS ;; 124|137) verdict=TIMEOUT ;; *) verdict=FAIL ;; esac
  [[ $verdict == PASS ]] || failed=1
  printf '%s\t%s\t%s\t%s\n' emulator "$verdict" "(waited $(($(date +%s) - t0)))" "$rc" >>"$out/steps.tsv"
  printf '== emulator     %s (ctest -L emulator, beside the steps above)\n' "$verdict"
  emulator_pid=""
}

step_sanitize() {
  # Every kernel variant at small, ragged sizes (the lab's check), the GPU memory tests and
  # the GPT on the GPU, under each tool; the four run side by side.
  local tools=(memcheck racecheck synccheck initcheck) pids=() rc=0 i
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
  (cd "$build" && ctest -R "deterministic" -L cuda --output-on-failure) || return 1
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

# The kernel lab: every op at the bar sizes (issue text), plus an L2-resident size where the
# bar size misses L2. Each run appends to lab.jsonl.
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
  # mixed precision (chapter 18): what autocast runs, and the kernels on bf16 data, at the
  # tensor-core bars' sizes (T = 4096 is the tensor_cores step's: its float64 check here is long)
  "matmul_bf16 --size 4096x4096x4096"
  "matmul_bf16_memory --dtype bfloat16 --size 4096x4096x4096"
  "attention_forward_bf16 --size 96x1024x64" "attention_backward_bf16 --size 96x1024x64"
  "attention_forward_bf16_memory --dtype bfloat16 --size 96x1024x64"
  "attention_backward_bf16_memory --dtype bfloat16 --size 96x1024x64"
  "sum_dim"
  "embedding_forward"
  "conv2d_forward --size 32x64x56x56x64x3x1x1x1x1 --size 32x64x56x56x64x3x1x1x1x64"
  "conv2d_backward_input" "conv2d_backward_weight"
  "max_pool2d_forward" "max_pool2d_backward" "avg_pool2d_forward" "avg_pool2d_backward"
)
step_lab() {
  local rc=0 run
  rm -f "$logs/lab.jsonl"
  for run in "${lab_runs[@]}"; do
    # shellcheck disable=SC2086  # the options are words
    "$brrr" kernel-lab $run --device cuda --seed 1 --json "$logs/lab.jsonl" || rc=1
    echo
  done
  return $rc
}

step_step() {
  "$root/bench/gpu_step.sh" "$build" 20 || return 1
  # Where brrr's step spends its time, op by op (the profiler synchronizes after each op).
  "$build/bench/bench_gpt_step" gpt-12m 64 5 --device cuda --profile
}

step_attention() {
  "$root/bench/attention.sh" "$build"
}

step_tensor_cores() {
  "$root/bench/tensor_cores.sh" "$build"
}

# ---------------------------------------------------------------------------------------------
# One step, as run_step runs it; the plan; or the run

if [[ -n ${BRRR_GPU_STEP:-} ]]; then
  "$BRRR_GPU_STEP"
  exit
fi

if ((dry_run)); then
  echo "gpu.sh --dry-run: the plan (output in $out)"
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
  echo "the kernel lab's runs:"
  printf '  brrr kernel-lab %s\n' "${lab_runs[@]}"
  command -v nvidia-smi >/dev/null && echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" ||
    echo "GPU: none here (the run needs one)"
  exit 0
fi

echo "gpu.sh: output in $out"
: >"$out/steps.tsv"
wanted env && { step_env | tee "$logs/env.log"; }
wanted build && run_step build 420 step_build
if [[ ! -x $brrr ]]; then
  echo "gpu.sh: no $brrr (the build failed or was skipped); stopping"
  failed=1
else
  wanted tests && start_emulator_tests && run_step tests 300 step_tests
  wanted sanitize && run_step sanitize 150 step_sanitize
  wanted reference && run_step reference 120 step_reference
  wanted train && run_step train 180 step_train
  wanted determinism && run_step determinism 180 step_determinism
  finish_emulator_tests
  wanted lab && run_step lab 400 step_lab
  wanted step && run_step step 300 step_step
  wanted attention && run_step attention 120 step_attention
  wanted tensor_cores && run_step tensor_cores 120 step_tensor_cores
fi
echo "gpu.sh: done in $(($(date +%s) - started)) s"
"$python" "$root/scripts/gpu_report.py" "$out" || failed=1
exit $failed
