"""tests/serve/hf_greedy.py BRRR FIXTURES_DIR CORPUS: brrr serve on Hugging Face GPT-2 folders continues
each prompt exactly as transformers' greedy generate() did.

FIXTURES_DIR holds the folders tests/models/hf_fixtures.py makes with transformers and
tokenizers (tied and untied heads, head sizes other than 64, a model vocabulary padded past its
tokenizer's, a sharded checkpoint), each with NAME.expected.json: its prompt ids and the greedy
tokens transformers generated. The server gets the prompt as token ids, and as text; the answer's
token_ids must be transformers' tokens and its text their decoding. The folders are made
first when FIXTURES_DIR has none (from CORPUS); skipped (exit 77) without transformers.
"""
import json
import os
import shutil
import subprocess
import sys

from harness import Server, skip


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
        print(f"{name}: {len(e['greedy'])} greedy tokens equal to transformers' generate()")


if __name__ == "__main__":
    main()
