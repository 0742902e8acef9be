"""bench/decode_gpu_peer.py SHAPE NEW_TOKENS BATCH DTYPE [--device cpu]: transformers' generation
on the GPU, the peer of bench/bench_decode_gpu.cpp (chapter 20, "Decoding on the GPU").

The same shapes (gpt-12m: 6 layers, 6 heads, 384 wide, vocab 4096; gpt2: 12, 12, 768, 50257;
n_positions 1024), random weights made by transformers, in float32 or bf16 (model.to(dtype)).
BATCH copies of a 4-token prompt, generate(do_sample=False) of NEW_TOKENS tokens each
(min_new_tokens, so none stops early). transformers' fastest documented way is tried first: a
static KV cache and the model's forward compiled by torch.compile (mode "reduce-overhead": CUDA
graphs); if that fails on this machine, the default dynamic cache, saying so. Tokens/s counts
every sequence's tokens over the whole call (the 4-token prefill included), the median of 3 after
two warm-ups (the first compiles), torch.cuda.synchronize() around each. --device cpu runs the
same on the CPU (a check of the script without a GPU; its figures are not the bar's).
"""
import sys
import time

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel

SHAPES = {"gpt-12m": (6, 6, 384, 4096), "gpt2": (12, 12, 768, 50257)}  # layers, heads, width, vocab


def timed(fn, device, repeats=3, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def main():
    args = [a for a in sys.argv[1:] if a not in ("--device", "cpu")]
    device = "cpu" if "--device" in sys.argv else "cuda"
    if len(args) != 4 or args[0] not in SHAPES or args[3] not in ("float32", "bf16"):
        sys.exit("usage: decode_gpu_peer.py gpt-12m|gpt2 NEW_TOKENS BATCH float32|bf16 [--device cpu]")
    shape, new_tokens, batch, dtype = args[0], int(args[1]), int(args[2]), args[3]
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("decode_gpu_peer.py: PyTorch sees no CUDA GPU")
    layers, heads, width, vocab = SHAPES[shape]
    torch.manual_seed(1)
    config = GPT2Config(n_layer=layers, n_head=heads, n_embd=width, vocab_size=vocab, n_positions=1024,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None, eos_token_id=None,
                        pad_token_id=0)
    model = GPT2LMHeadModel(config).eval().to(device)
    if dtype == "bf16":
        model = model.to(torch.bfloat16)
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"# decode_gpu_peer {shape} {new_tokens} {batch} {dtype}: transformers {transformers.__version__}, "
          f"torch {torch.__version__}, {name}")
    prompt = torch.tensor([[1, 2, 3, 4]] * batch, device=device)
    mask = torch.ones_like(prompt)

    def generate(**extra):
        with torch.no_grad():
            model.generate(prompt, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                           do_sample=False, pad_token_id=0, **extra)

    how = "static cache, torch.compile"
    try:
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        seconds = timed(lambda: generate(cache_implementation="static"), device)
    except Exception as e:  # what failed is printed: the fallback is a figure of another method
        print(f"# static cache + torch.compile failed ({type(e).__name__}: {str(e)[:200]}); the default cache, eager")
        model.forward = model.__class__.forward.__get__(model)
        how = "dynamic cache, eager"
        seconds = timed(generate, device)
    print(f"decode  {shape} {dtype:<7} batch {batch:3d} {new_tokens * batch / seconds:10.1f} tokens/s  "
          f"({new_tokens} tokens each, {seconds:.3f} s; {how})")


if __name__ == "__main__":
    main()
