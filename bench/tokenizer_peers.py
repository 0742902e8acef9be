#!/usr/bin/env python3
"""bench/tokenizer_peers.py: the tokenizers brrr is measured against (chapter 06).

bench/tokenizer.sh runs one task per process (thread counts are fixed when a library loads):

  train-hf         Hugging Face tokenizers: BpeTrainer, same vocabulary size, the GPT-2 split
                   pattern (Split, then ByteLevel without its own regex), <|endoftext|>.
  train-spm        sentencepiece BPE (spm_train --model_type=bpe, or the Python module when
                   the command is missing), same vocabulary size, --num_threads.
  encode-tiktoken  tiktoken loaded with brrr's exported ranks and the same split pattern:
                   the same vocabulary and the same ids as brrr.
  encode-hf        HF tokenizers loaded with brrr's vocabulary and merges (tok.txt), same
                   split pattern.

Each prints rows `ROW|corpus|tool|task|threads|time|MB/s|note` (median of --repeat runs),
the format bench_tokenizer prints.
"""
import argparse
import base64
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# brrr's kGpt2Pattern (tokenizer/include/brrr/tokenizer/pretokenize.h), as tiktoken writes it.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
EOT = "<|endoftext|>"


def format_time(seconds):
    """0.549 s, 4.34 ms, 2.29 us: as bench_tokenizer writes times."""
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


def row(corpus, tool, task, threads, seconds, megabytes, note=""):
    rate = f"{megabytes / seconds:.1f}" if megabytes else ""
    print(f"ROW|{os.path.basename(corpus)}|{tool}|{task}|{threads}|{format_time(seconds)}|{rate}|{note}",
          flush=True)


def median_seconds(repeat, run):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def chunks_of(text, parts):
    """The text cut at newlines into about `parts` pieces, for the batch encoders."""
    out, start, step = [], 0, max(1, len(text) // parts)
    while start < len(text):
        end = text.find("\n", start + step)
        end = len(text) if end < 0 else end + 1
        out.append(text[start:end])
        start = end
    return out


def bytes_to_unicode():
    """GPT-2's map from bytes to printable characters, which HF's ByteLevel uses."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def read_brrr_tokenizer(path):
    """(tokens: list of bytes, merges: list of (left, right) ids by id) from a brrr tok.txt."""
    def unquote(s):
        assert s[0] == '"' and s[-1] == '"', s
        out, i, body = bytearray(), 0, s[1:-1]
        while i < len(body):
            c = body[i]
            if c != "\\":
                out += c.encode("utf-8")
                i += 1
                continue
            e = body[i + 1]
            if e == "x":
                out.append(int(body[i + 2:i + 4], 16))
                i += 4
            else:
                out += {"\\": b"\\", '"': b'"', "n": b"\n", "r": b"\r", "t": b"\t"}[e]
                i += 2
        return bytes(out)

    tokens, merges = [], {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            parts = line.split(" ", 4)
            if not parts[0].isdigit():
                continue
            if parts[1] == "merge":
                merges[int(parts[0])] = (int(parts[2]), int(parts[3]))
                tokens.append(unquote(parts[4]))
            else:
                tokens.append(unquote(line.split(" ", 2)[2]))
    return tokens, merges


def train_hf(args, text_mb):
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    def run():
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(GPT2_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        trainer = trainers.BpeTrainer(vocab_size=args.vocab_size, special_tokens=[EOT],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False)
        tok.train([args.corpus], trainer)
        run.vocab = tok.get_vocab_size()

    s = median_seconds(args.repeat, run)
    row(args.corpus, "HF tokenizers", "train", args.threads, s, text_mb, f"vocab {run.vocab}")


def train_spm(args, text_mb):
    spm_train = shutil.which("spm_train")
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "spm")
        flags = [f"--input={args.corpus}", f"--model_prefix={prefix}", f"--vocab_size={args.vocab_size}",
                 "--model_type=bpe", f"--num_threads={args.threads}", "--character_coverage=1.0",
                 "--max_sentence_length=100000", "--minloglevel=2", f"--user_defined_symbols={EOT}"]

        def run():
            if spm_train:
                subprocess.run([spm_train] + flags, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            else:
                import sentencepiece as spm
                spm.SentencePieceTrainer.train(" ".join(flags))

        s = median_seconds(args.repeat, run)
        how = "spm_train (Debian " + subprocess.run(["dpkg-query", "-W", "-f=${Version}", "sentencepiece"],
                                                    capture_output=True, text=True).stdout + ")" \
            if spm_train else "sentencepiece Python module"
        row(args.corpus, "sentencepiece", "train", args.threads, s, text_mb, how)


def encode_tiktoken(args, text):
    import tiktoken

    ranks = {}
    with open(args.ranks, "rb") as f:
        for line in f:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    enc = tiktoken.Encoding(name="brrr", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                            special_tokens={EOT: len(ranks)})
    mb = len(text.encode("utf-8")) / 1e6
    if args.threads == 1:
        result = {}
        s = median_seconds(args.repeat, lambda: result.update(ids=enc.encode_ordinary(text)))
    else:
        chunks = chunks_of(text, args.threads * 8)
        result = {}
        s = median_seconds(args.repeat, lambda: result.update(
            ids=[i for ids in enc.encode_ordinary_batch(chunks, num_threads=args.threads) for i in ids]))
    batch = "" if args.threads == 1 else f", encode_ordinary_batch of {len(chunks)} chunks cut at newlines"
    row(args.corpus, f"tiktoken {tiktoken.__version__}", "encode", args.threads, s, mb,
        f"{len(result['ids'])} tokens, brrr's ranks{batch}")


def encode_hf(args, text):
    import tokenizers
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    tokens, merges = read_brrr_tokenizer(args.brrr_tokenizer)
    u = bytes_to_unicode()
    name = ["".join(u[b] for b in t) for t in tokens]
    vocab = {n: i for i, n in enumerate(name) if i < len(tokens) - 1}  # the last is <|endoftext|>
    merge_list = [(name[merges[i][0]], name[merges[i][1]]) for i in sorted(merges)]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merge_list))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GPT2_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    mb = len(text.encode("utf-8")) / 1e6
    chunks = chunks_of(text, max(64, args.threads * 8))
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
    result = {}
    s = median_seconds(args.repeat, lambda: result.update(
        n=sum(len(e.ids) for e in encode(chunks, add_special_tokens=False))))
    row(args.corpus, f"HF tokenizers {tokenizers.__version__}", "encode", args.threads, s, mb,
        f"{result['n']} tokens, brrr's vocabulary and merges, {encode.__name__} of {len(chunks)} chunks")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", choices=["train-hf", "train-spm", "encode-tiktoken", "encode-hf"])
    p.add_argument("--corpus", required=True)
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--ranks", help="brrr's tiktoken export (brrr.tiktoken)")
    p.add_argument("--brrr-tokenizer", help="brrr's tokenizer file (tok.txt)")
    args = p.parse_args()
    # Thread counts, before the libraries start their pools.
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "true" if args.threads > 1 else "false"
    with open(args.corpus, encoding="utf-8", newline="") as f:
        text = f.read()
    text_mb = os.path.getsize(args.corpus) / 1e6
    try:
        if args.task == "train-hf":
            train_hf(args, text_mb)
        elif args.task == "train-spm":
            train_spm(args, text_mb)
        elif args.task == "encode-tiktoken":
            encode_tiktoken(args, text)
        else:
            encode_hf(args, text)
    except ImportError as e:
        print(f"tokenizer_peers: {args.task} skipped: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
