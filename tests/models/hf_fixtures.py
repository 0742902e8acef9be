"""tests/models/hf_fixtures.py OUT_DIR CORPUS

Makes small Hugging Face GPT-2 folders with the real libraries (tokenizers trains the byte-level
BPE, transformers builds, briefly trains and saves the model), and beside each folder NAME a
NAME.expected.json with what Hugging Face computes on them, for tests/models/test_hf.cpp to
compare brrr against:

  ids, logits (flattened, shape)   GPT2LMHeadModel(ids).logits in float32
  loss                             GPT2LMHeadModel(ids, labels=ids).loss (mean over T - 1 predictions)
  prompt_text, prompt, greedy      generate(prompt, do_sample=False)'s new tokens, to the end of the context
  texts, text_ids                  the tokenizer's ids for each text (code, Unicode, whitespace runs)
  eval_text, eval_loss             the mean loss brrr eval defines (its --help), computed with transformers

The folders differ where brrr could go wrong: head sizes other than 64, an untied lm_head, odd
vocabulary sizes, a model vocabulary larger than its tokenizer's, a sharded checkpoint, the
older vocab.json + merges.txt tokenizer files, and the exact GELU ("gelu", not GPT-2's "gelu_new"). Chapter 08 (training: "Pretrained models").
"""
import json
import os
import random
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Tokenizer, GPT2TokenizerFast

# (name, layers, heads, width, context, tokenizer vocabulary, extra model vocabulary, tied,
#  layer_norm_epsilon, how the files are written, activation_function)
SHAPES = [
    ("tied", 2, 3, 48, 64, 701, 0, True, 1e-5, "tokenizer.json", "gelu_new"),
    ("untied", 1, 2, 40, 32, 523, 0, False, 1e-6, "tokenizer.json", "gelu"),
    ("padded", 2, 4, 32, 48, 590, 7, True, 1e-5, "vocab+merges", "gelu_new"),
    ("sharded", 3, 2, 64, 40, 611, 0, False, 1e-5, "sharded", "gelu_new"),
]


def texts(corpus):
    """Inputs for the tokenizer comparison: prose, code, Unicode, whitespace runs, special tokens."""
    rng = random.Random(5)
    code = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models", "gpt", "gpt.cpp"),
                encoding="utf-8").read()[:6000]
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F),
              (0x3040, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0x1F300, 0x1F64F), (0x2000, 0x206F)]
    unicode = ""
    for _ in range(400):
        lo, hi = rng.choice(ranges)
        unicode += "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 12)))
        unicode += rng.choice([" ", "  ", "\n", "\t", "", "'s ", "'ll", " 123", "\u00a0", "\r\n"])
    spaces = "a  b   c\n\n\n  d \t\t e   \n x\u3000y \u2003z    ' ve'S I'M we'll'd   \n\n"
    mixed = corpus[1000:3000] + "<|endoftext|>" + corpus[5000:5500] + "<|endoftext|><|endoftext|>  <|endoftext|>x"
    return {"prose": corpus[:4000], "code": code, "unicode": unicode, "spaces": spaces * 3, "mixed": mixed}


def train_tokenizer(text, vocab_size):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([text], trainer)
    return tok


def main():
    out, corpus_path = sys.argv[1], sys.argv[2]
    corpus = open(corpus_path, encoding="utf-8").read()[:200000]
    torch.manual_seed(0)
    os.makedirs(out, exist_ok=True)
    inputs = texts(corpus)
    for name, n_layer, n_head, n_embd, n_ctx, tok_vocab, extra, tied, eps, files, activation in SHAPES:
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        tok = train_tokenizer(corpus, tok_vocab)
        vocab = tok.get_vocab_size()
        if files == "vocab+merges":
            tok.model.save(folder)  # vocab.json + merges.txt, as GPT-2's original files
            reference = GPT2Tokenizer(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"))
            encode = lambda s: reference.encode(s)  # noqa: E731
        else:
            fast = GPT2TokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                     unk_token="<|endoftext|>")
            fast.save_pretrained(folder, legacy_format=False)  # tokenizer.json
            encode = lambda s: tok.encode(s).ids  # noqa: E731
        config = GPT2Config(vocab_size=vocab + extra, n_positions=n_ctx, n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                            layer_norm_epsilon=eps, tie_word_embeddings=tied, activation_function=activation,
                            resid_pdrop=0.0, embd_pdrop=0.0,
                            attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
        model = GPT2LMHeadModel(config)
        # A few steps of training, so the weights are not all N(0, 0.02) and the logits are of size.
        ids = torch.tensor(tok.encode(corpus[:20000]).ids)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        model.train()
        for step in range(200):
            starts = torch.randint(0, len(ids) - n_ctx - 1, (8,))
            batch = torch.stack([ids[s:s + n_ctx] for s in starts])
            loss = model(batch, labels=batch).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        if files == "sharded":
            model.save_pretrained(folder, safe_serialization=True, max_shard_size="40KB")
        else:
            model.save_pretrained(folder, safe_serialization=True)
        x = ids[100:100 + n_ctx].unsqueeze(0)
        prompt_text = "\nROMEO:\nWhat say"
        prompt = torch.tensor([encode(prompt_text)])
        with torch.no_grad():
            out_ = model(x, labels=x)
            model.generation_config.eos_token_id = None
            model.generation_config.pad_token_id = 0
            # synced_gpus=False: deciding it imports torch.distributed.fsdp, which Debian's torch 1.13 cannot on Python 3.11.
            greedy = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n_ctx - prompt.shape[1],
                                    do_sample=False, eos_token_id=None, pad_token_id=0, synced_gpus=False)
            # brrr eval's definition: consecutive windows of the context length, each predicting its
            # next tokens, so every token but the first is predicted once.
            eval_text = corpus[30000:36000]
            eval_ids = encode(eval_text)
            n, total = len(eval_ids) - 1, 0.0
            for s in range(0, n, n_ctx):
                w = min(n_ctx, n - s)
                logits = model(torch.tensor([eval_ids[s:s + w]])).logits[0]
                total += float(torch.nn.functional.cross_entropy(logits, torch.tensor(eval_ids[s + 1:s + w + 1]),
                                                                 reduction="sum"))
        expected = {
            "eval_text": eval_text,
            "eval_ids": eval_ids,
            "eval_predicted": n,
            "eval_loss": total / n,
            "ids": x[0].tolist(),
            "logits": out_.logits[0].flatten().tolist(),
            "shape": list(out_.logits[0].shape),
            "loss": float(out_.loss),
            "prompt_text": prompt_text,
            "prompt": prompt[0].tolist(),
            "greedy": greedy[0, prompt.shape[1]:].tolist(),
            "texts": inputs,
            "text_ids": {k: encode(v) for k, v in inputs.items()},
        }
        with open(os.path.join(out, name + ".expected.json"), "w", encoding="utf-8") as f:
            json.dump(expected, f)


if __name__ == "__main__":
    main()
