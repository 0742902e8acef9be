#!/usr/bin/env bash
# bench/llmc_step.sh: llm.c's GPT-2 training step (train_gpt2cu, karpathy/llm.c) on the GPU, the
# peer issue 55's GPT-2 bar names beside PyTorch's (scripts/gpu.sh, step llmc; chapter 17).
# llm.c's code never enters this repository: scripts/gpu_bundle.sh copies its source at a pinned
# commit into .gpu-bundle/llm.c (ignored by git), which reaches a GPU machine with the bundle.
#
#   bench/llmc_step.sh build SRC DIR
#       copy SRC (.gpu-bundle/llm.c) into DIR and make train_gpt2cu there: bf16, no cuDNN (its
#       attention is then llm.c's own kernels), no MPI, no NCCL (one GPU)
#   bench/llmc_step.sh run DIR BRRR CORPUS B T STEPS
#       the data: a BPE tokenizer of 4,096 tokens trained on CORPUS by brrr, and CORPUS encoded
#       by brrr into one file in llm.c's format (`brrr tokenizer encode --format llmc`); llm.c
#       reads ids only, and these are below GPT-2's 50,257. Then train_gpt2cu -e d12 (GPT-2
#       124M, random weights, the vocabulary padded to 50,304 as brrr's gpt2-124m) at batch B,
#       sequence T, for STEPS steps, no sampling, one validation batch. Prints one line:
#         llm.c gpt2-124m (bf16) B=16 T=1024: 35.1 ms/step, 466000 tokens/s (median of steps 4-10); llm.c's own MFU 40.2%
#       scripts/gpu_report.py sets it beside brrr's and torch.compile's, with the model FLOPs of
#       brrr's formula (bench/bench_gpt_step.cpp) for all three.
set -euo pipefail

mode=${1:-}
case $mode in
  build)
    (($# == 3)) || { echo "usage: bench/llmc_step.sh build SRC DIR" >&2; exit 2; }
    src=$2 dir=$3
    [[ -f $src/train_gpt2.cu ]] || { echo "llmc_step: no llm.c source in $src (scripts/gpu_bundle.sh puts it there)" >&2; exit 1; }
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -r "$src"/. "$dir"/
    # CUDA 13 (the GPU machine's nvcc) takes cudaMemAdvise's location as a cudaMemLocation, not a
    # device number: the one line of the pinned llm.c that does not compile there, in its
    # out-of-memory fallback (never run by this benchmark), changed in the copy only.
    sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' \
      "$dir/llmc/cuda_utils.cuh"
    # llm.c links NVML (-lnvidia-ml). A toolkit without its stubs leaves only the driver's
    # versioned libnvidia-ml.so.1: a link to it in DIR/nvml lets the linker find it.
    mkdir -p "$dir/nvml"
    nvml=$(ldconfig -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 /{print $NF; exit}')
    [[ -n $nvml ]] && ln -sf "$nvml" "$dir/nvml/libnvidia-ml.so"
    make -C "$dir" train_gpt2cu USE_CUDNN=0 NO_USE_MPI=1 NO_MULTI_GPU=1 PRECISION=BF16 \
      NVCC_LDLIBS="-L$(realpath "$dir/nvml") -L/usr/local/cuda/lib64/stubs"
    ;;
  run)
    (($# == 7)) || { echo "usage: bench/llmc_step.sh run DIR BRRR CORPUS B T STEPS" >&2; exit 2; }
    dir=$(realpath "$2") brrr=$(realpath "$3") corpus=$(realpath "$4") B=$5 T=$6 steps=$7
    [[ -x $dir/train_gpt2cu ]] || { echo "llmc_step: no $dir/train_gpt2cu (run the build first)" >&2; exit 1; }
    ((steps >= 5)) || { echo "llmc_step: STEPS must be at least 5 (the first 3 are warm-up)" >&2; exit 2; }
    data=$dir/brrr-data
    mkdir -p "$data"
    "$brrr" tokenizer train --input "$corpus" --vocab-size 4096 --out "$data/tokenizer.txt" >/dev/null
    "$brrr" tokenizer encode --tokenizer "$data/tokenizer.txt" --input "$corpus" --out "$data/train.bin" \
      --format llmc >/dev/null
    # -v: validate at the first and last step only (one batch, -m 1); -s 0: no sampling; -r 1 and
    # -ge (unset: 2 on sm_90) are llm.c's defaults for GPT-2, kept as its README runs it.
    (cd "$dir" && ./train_gpt2cu -e d12 -b "$B" -t "$T" -x "$steps" -i "$data/train.bin" -j "$data/train.bin" \
      -v 100000 -m 1 -s 0) >"$dir/train.log" 2>&1 || { tail -30 "$dir/train.log"; exit 1; }
    # "step    4/10 | loss ... | 35.12 ms | 40.2% bf16 MFU | 466000 tok/s": steps 4 onwards.
    awk -v B="$B" -v T="$T" '
      /^step +[0-9]+\/[0-9]+ \|/ {
        split($2, s, "/"); if (s[1] + 0 < 4) next
        for (i = 1; i <= NF; i++) { if ($i == "ms") ms[n] = $(i - 1); if ($i == "bf16" && $(i + 1) == "MFU") mfu[n] = $(i - 1) }
        first = first ? first : s[1]; last = s[1]; n++
      }
      END {
        if (n == 0) { print "llmc_step: no step lines in train.log" > "/dev/stderr"; exit 1 }
        # the median step time (insertion sort: a few dozen values)
        for (i = 1; i < n; i++) for (j = i; j > 0 && ms[j - 1] + 0 > ms[j] + 0; j--) { t = ms[j]; ms[j] = ms[j - 1]; ms[j - 1] = t }
        m = n % 2 ? ms[(n - 1) / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2
        printf "llm.c gpt2-124m (bf16) B=%d T=%d: %.1f ms/step, %.0f tokens/s (median of steps %d-%d); llm.c'"'"'s own MFU %s\n",
               B, T, m, B * T / (m / 1000), first, last, mfu[n - 1]
      }' "$dir/train.log"
    ;;
  *)
    echo "usage: bench/llmc_step.sh build SRC DIR | run DIR BRRR CORPUS B T STEPS" >&2
    exit 2
    ;;
esac
