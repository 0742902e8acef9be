"""bench/sample_peer.py [V ...]: transformers' sampling step, the peer of bench/bench_sample_token.cpp
(chapter 08, sampling).

What generate(do_sample=True) does to each token's logits, with its own classes: the
TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper (which sorts the vocabulary),
softmax, then torch.multinomial. The same settings as bench_sample_token: normal logits
(standard deviation 3), temperature 0.8, top_k 0 or 50, top_p 1 or 0.9; one thread;
microseconds per token, the median of 5 runs. Runs in .venv-bench (bench/setup_bench_venv.sh).
"""
import sys
import time

import torch
from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper,
                                                    TopKLogitsWarper, TopPLogitsWarper)


def main():
    sizes = [int(v) for v in sys.argv[1:]] or [4096, 50257]
    torch.set_num_threads(1)
    print(f"# sample_peer: transformers' logits warpers + torch.multinomial, torch {torch.__version__}, one thread")
    print(f"{'V':>7} {'top_k':>6} {'top_p':>6} {'us/token':>14}")
    for V in sizes:
        g = torch.Generator().manual_seed(1)
        logits = (torch.randn(1, V, generator=g) * 3.0).float()
        ids = torch.zeros(1, 1, dtype=torch.long)
        tokens = max(20, 2000000 // V)
        for top_k in (0, 50):
            for top_p in (1.0, 0.9):
                warpers = LogitsProcessorList([TemperatureLogitsWarper(0.8)])
                if top_k > 0:
                    warpers.append(TopKLogitsWarper(top_k))
                if top_p < 1.0:
                    warpers.append(TopPLogitsWarper(top_p))
                runs = []
                for _ in range(5):
                    start = time.perf_counter()
                    for _ in range(tokens):
                        scores = warpers(ids, logits)
                        torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=g)
                    runs.append((time.perf_counter() - start) / tokens * 1e6)
                runs.sort()
                print(f"{V:7d} {top_k:6d} {top_p:6.1f} {runs[2]:14.1f}", flush=True)


if __name__ == "__main__":
    main()
