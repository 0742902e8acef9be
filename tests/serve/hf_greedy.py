"""tests/serve/hf_greedy.py BRRR FIXTURES_DIR CORPUS: brrr serve on Hugging Face GPT-2 folders continues
each prompt exactly as transformers' greedy generate() did.

FIXTURES_DIR holds the folders tests/models/hf_fixtures.py makes with transformers and
tokenizers (tied and untied heads, head sizes other than 64, a model vocabulary padded past its
tokenizer's, a sharded checkpoint), each with NAME.expected.json: its prompt ids and the greedy
tokens transformers generated. The server gets the prompt as token ids, and as text; the answer's
token_ids must be transformers' tokens and its text their decoding; so must each choice of a
request of several prompts, and a scoring request of several prompts (echo, logprobs, as
lm-eval sends) must give transformers' log-probabilities. The folders are made
first when FIXTURES_DIR has none (from CORPUS); skipped (exit 77) without transformers.
"""
import json
import math
import os
import shutil
import subprocess
import sys

from harness import Server, skip


def score_like_lm_eval(s, e):
    """lm-eval's scoring request: prompts as lists of token ids, echo, logprobs, max_tokens 0.
    The window transformers computed logits for, and prefixes of it, in one request: every
    prompt token's logprob is transformers' log-softmax (over the tokenizer's vocabulary, the ids
    the server may return) to float32's rounding, and a prefix's the same bits as the whole
    window's (causal attention; batch-invariant steps). Returns the largest difference."""
    n_vocab = json.loads(s.get("/v1/models")[2])["data"][0]["meta"]["n_vocab"]
    ids, (T, V) = e["ids"], e["shape"]
    reference = []  # reference[t]: log p(ids[t + 1] | ids[:t + 1])
    for t in range(T - 1):
        row = e["logits"][t * V:t * V + n_vocab]
        top = max(row)
        reference.append(row[ids[t + 1]] - top - math.log(sum(math.exp(x - top) for x in row)))
    prompts = [ids, ids[:T // 3], ids[:2], ids[:T - 5]]
    status, _, raw = s.post("/v1/completions", {"prompt": prompts, "echo": True, "logprobs": 1, "max_tokens": 0})
    assert status == 200, raw
    choices = json.loads(raw)["choices"]
    assert [c["index"] for c in choices] == list(range(len(prompts)))
    whole = choices[0]["logprobs"]["token_logprobs"]
    worst = 0.0
    for c, p in zip(choices, prompts):
        got = c["logprobs"]["token_logprobs"]
        assert len(got) == len(p) and got[0] is None, c
        assert got == whole[:len(p)], ("a prefix's logprobs are not the whole window's", len(p))
        for t in range(1, len(p)):
            worst = max(worst, abs(got[t] - reference[t - 1]))
    scale = max(abs(x) for x in e["logits"])  # tests/models/test_hf.cpp holds logits to 1e-5 of it
    assert worst <= 5e-5 * scale, (worst, scale)
    return worst


def main():
    brrr, fixtures, corpus = sys.argv[1], sys.argv[2], sys.argv[3]
    if not os.path.exists(os.path.join(fixtures, "done")):
        try:
            import tokenizers, transformers  # noqa: F401
        except ImportError:
            skip("python3 cannot import transformers and tokenizers (scripts/setup.sh installs them into .venv)")
        maker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "hf_fixtures.py")
        tmp = fixtures + f".tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run([sys.executable, maker, tmp, corpus], check=True)
        open(os.path.join(tmp, "done"), "w").write("made by tests/models/hf_fixtures.py\n")
        shutil.rmtree(fixtures, ignore_errors=True)
        os.rename(tmp, fixtures)
    for name in ["tied", "untied", "padded", "sharded"]:
        e = json.load(open(os.path.join(fixtures, name + ".expected.json")))
        with Server(brrr, os.path.join(fixtures, name), "--slots", "2") as s:
            body = {"prompt": e["prompt"], "max_tokens": len(e["greedy"]), "temperature": 0, "logprobs": 0}
            status, _, raw = s.post("/v1/completions", body)
            assert status == 200, raw
            got = json.loads(raw)["choices"][0]
            assert got["logprobs"]["token_ids"] == e["greedy"], (name, got["logprobs"]["token_ids"], e["greedy"])
            status, _, detok = s.post("/detokenize", {"tokens": e["greedy"]})
            assert got["text"] == json.loads(detok)["content"], (name, got["text"])
            # The same prompt as text: the server's tokenizer gives the same ids, so the same answer.
            status, _, raw = s.post("/v1/completions", dict(body, prompt=e["prompt_text"]))
            assert json.loads(raw)["choices"][0]["logprobs"]["token_ids"] == e["greedy"], name
            # Several prompts in one request, in both batch forms: each continues as transformers did.
            for prompts in ([e["prompt"], e["prompt"]], [e["prompt_text"], e["prompt_text"]]):
                status, _, raw = s.post("/v1/completions", dict(body, prompt=prompts))
                assert status == 200, raw
                for c in json.loads(raw)["choices"]:
                    assert c["logprobs"]["token_ids"] == e["greedy"], (name, c["index"])
            worst = score_like_lm_eval(s, e)
        print(f"{name}: {len(e['greedy'])} greedy tokens equal to transformers' generate(); several prompts' echoed "
              f"logprobs within {worst:.1e} of transformers' log-softmax")


if __name__ == "__main__":
    main()
