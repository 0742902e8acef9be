"""bench/decode_peer.py SHAPE NEW_TOKENS PREFILL DTYPE: transformers' generation on the CPU, the
peer of bench/bench_decode.cpp (chapter 08, "Why decoding is memory-bound").

The same shapes (gpt-12m: 6 layers, 6 heads, 384 wide, vocab 4096; gpt2: 12, 12, 768, 50257;
both with n_positions 1024), random weights made by transformers (GPT2LMHeadModel(GPT2Config)),
in float32 or, with DTYPE bf16, converted with model.to(torch.bfloat16) (PyTorch then computes
in bfloat16). Threads: torch.set_num_threads from OMP_NUM_THREADS (bench/decode.sh sets 2).
Decode: generate(do_sample=False) of NEW_TOKENS tokens after a 4-token prompt, the KV cache on
(transformers' default), min_new_tokens so it never stops early; tokens/s over the whole call
(the 4-token prefill included), the median of 3 after one warm-up. Prefill: one forward over a
PREFILL-token prompt under no_grad with logits_to_keep=1 (only the last position's logits, as
generate's prefill asks for), the median of 3; the full forward (every position's logits) is
printed too. Runs in .venv-bench (bench/setup_bench_venv.sh: PyTorch 2.15.0, transformers 5.24.0).
"""
import os
import sys
import time

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel

from timing import median_seconds

SHAPES = {"gpt-12m": (6, 6, 384, 4096), "gpt2": (12, 12, 768, 50257)}  # layers, heads, width, vocab


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in SHAPES or sys.argv[4] not in ("float32", "bf16"):
        sys.exit("usage: decode_peer.py gpt-12m|gpt2 NEW_TOKENS PREFILL float32|bf16")
    shape, new_tokens, prefill, dtype = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    layers, heads, width, vocab = SHAPES[shape]
    torch.manual_seed(1)
    config = GPT2Config(n_layer=layers, n_head=heads, n_embd=width, vocab_size=vocab, n_positions=1024,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None, eos_token_id=None,
                        pad_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    if dtype == "bf16":
        model = model.to(torch.bfloat16)
    print(f"# decode_peer {shape} {new_tokens} {prefill} {dtype}: transformers {transformers.__version__}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    prompt = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        def generate():
            model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens,
                           min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
        decode_s = median_seconds(generate, 3, warmup=1)
        ids = torch.tensor([[(i * 7919) % vocab for i in range(prefill)]])
        prefill_s = median_seconds(lambda: model(ids, logits_to_keep=1), 3, warmup=1)
        full_s = median_seconds(lambda: model(ids), 3, warmup=1)
    print(f"decode  {shape} {dtype:<7} {new_tokens / decode_s:8.1f} tokens/s  ({new_tokens} tokens, {decode_s:.3f} s)")
    print(f"prefill {shape} {dtype:<7} {prefill_s:8.3f} s for {prefill} tokens  ({prefill / prefill_s:.0f} tokens/s; "
          f"every position's logits: {full_s:.3f} s)")


if __name__ == "__main__":
    main()
