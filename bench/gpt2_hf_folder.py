"""bench/gpt2_hf_folder.py OUT CORPUS: a Hugging Face GPT-2 folder at GPT-2 124M's shape (12 layers,
12 heads, 768 wide, 1,024 positions, a model vocabulary of 50,257) with transformers' random
weights and a byte-level BPE tokenizer trained on CORPUS by tokenizers (fewer tokens than the
model's vocabulary when the corpus is small: brrr serves the model's ids past the tokenizer's as
never drawn). For the GPU's serving bar (scripts/gpu.sh, step decode: brrr serve --device cuda
under tests/serve/load_test.py --measure), which counts tokens per second, not their text; chapter
20. The GPU machine has no network, so GPT-2's own weights are not fetched.
"""
import os
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models"))
from hf_fixtures import train_tokenizer  # noqa: E402


def main():
    out, corpus_path = sys.argv[1], sys.argv[2]
    corpus = open(corpus_path, encoding="utf-8").read()
    torch.manual_seed(0)
    os.makedirs(out, exist_ok=True)
    tok = train_tokenizer(corpus, 50257)
    GPT2TokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                      unk_token="<|endoftext|>").save_pretrained(out, legacy_format=False)
    config = GPT2Config(vocab_size=50257, n_positions=1024, n_layer=12, n_head=12, n_embd=768, bos_token_id=0,
                        eos_token_id=0)
    GPT2LMHeadModel(config).save_pretrained(out, safe_serialization=True)
    print(f"gpt2_hf_folder: {out}: GPT-2 124M's shape, random weights, a tokenizer of {tok.get_vocab_size()} tokens")


if __name__ == "__main__":
    main()
