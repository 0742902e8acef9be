"""tests/serve/fuzz_api.py BRRR CHECKPOINT [COUNT]: thousands of bad requests, and brrr serve
answers each with a 4xx and an error message, and is still healthy after.

Malformed JSON, wrong types, huge and negative numbers, invalid UTF-8, oversized bodies, token
ids out of range, prompts longer than the context (400 naming block_size), batches of prompts
with one thing wrong (an id, an empty prompt, a mix of forms, one too long: 400 naming it), and
unknown fields (ignored: 200). Deterministic: the cases are drawn from a seeded random.Random.
"""
import json
import random
import sys

from harness import Server

FIELDS = ["prompt", "max_tokens", "temperature", "top_k", "top_p", "seed", "stop", "logprobs", "echo", "stream",
          "stream_options", "n"]
BAD_VALUES = [None, True, "x", "", -1, -10**30, 10**30, 2**64, 1e308, -1e308, 0.5, [], {}, [[]], ["a", 1],
              [None], {"a": 1}, "\ud800", [-5], [10**9], "9" * 400]


def bad_prompt_batch(rng, block_size, vocab):
    """A batch of prompts (OpenAI's array forms) with one thing wrong in it."""
    good = [[rng.randrange(vocab) for _ in range(rng.randrange(1, 6))] for _ in range(rng.randrange(1, 8))]
    at = rng.randrange(len(good))
    what = rng.randrange(6)
    if what == 0:  # an id out of the vocabulary, negative, or not an integer
        good[at][rng.randrange(len(good[at]))] = rng.choice([vocab, vocab + 3, -1, 2**40, 1.5, "7", None, True])
    elif what == 1:  # an empty prompt
        good[at] = rng.choice([[], ""])
    elif what == 2:  # a mix of forms
        good[at] = rng.choice(["text", 3, None, {"a": 1}])
        if at == 0:  # ["text"] and [3] alone are prompts
            good.append([1])
    elif what == 3:  # longer than the context
        good[at] = [1] * (block_size + rng.randrange(1, 20))
        return json.dumps({"prompt": good}).encode(), 400, "prompt", f"prompt[{at}] has"
    elif what == 4:  # an empty batch
        good = []
    else:  # strings with an id list among them
        good = ["hi"] * len(good)
        good[at] = [1, 2]
        if at == 0:
            good.append("there")
    return json.dumps({"prompt": good}).encode(), 400, "prompt", None


def bad_body(rng, block_size, vocab):
    kind = rng.randrange(10)
    if kind == 9:
        return bad_prompt_batch(rng, block_size, vocab)
    if kind == 0:  # malformed JSON
        good = json.dumps({"prompt": "hi", "max_tokens": 2})
        cut = rng.randrange(1, len(good) - 1)
        body = good[:cut].encode() + rng.choice([b"", b"}", b",,", b"\x00", b"]"])
        try:
            json.loads(body)
            return body, None, None, None  # the cut happened to leave valid JSON ('{"prompt": "hi"}')
        except ValueError:
            return body, 400, None, None
    if kind == 1:  # invalid UTF-8 inside a string
        return b'{"prompt": "a' + bytes([rng.choice([0xff, 0xc3, 0xed, 0xf8, 0x80])]) + b'"}', 400, None, None
    if kind == 2:  # not an object
        return json.dumps(rng.choice([[1, 2], "text", 3, None, True])).encode(), 400, None, None
    if kind == 3:  # token ids out of range
        ids = [rng.randrange(vocab) for _ in range(3)] + [rng.choice([vocab, vocab + 7, -1, 2**40])]
        return json.dumps({"prompt": ids}).encode(), 400, "prompt", None
    if kind == 4:  # longer than the context
        return json.dumps({"prompt": [1] * (block_size + rng.randrange(1, 50))}).encode(), 400, "prompt", "block_size"
    if kind == 5:  # oversized body
        return json.dumps({"prompt": "a" * (2 << 20)}).encode(), 413, None, None
    # a known field of a wrong type or out of range
    field = rng.choice(FIELDS)
    value = rng.choice(BAD_VALUES)
    body = {"prompt": "hi", "max_tokens": 2, field: value}
    if field == "prompt" and value in ("x", "9" * 400, [[]]):
        value = None
        body[field] = None
    return json.dumps(body).encode(), None, field, None


def main():
    brrr, checkpoint = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
    rng = random.Random(31)
    seen = {}
    with Server(brrr, checkpoint, "--slots", "2") as s:
        meta = json.loads(s.get("/v1/models")[2])["data"][0]["meta"]
        block_size, vocab = meta["n_ctx"], meta["n_vocab"]
        for i in range(count):
            body, expected, param, says = bad_body(rng, block_size, vocab)
            status, _, raw = s.post("/v1/completions", body)
            if expected is None and status == 200:  # a value that happens to be valid for the field (null, 0.5, ...)
                continue
            assert 400 <= status < 500, (i, body[:200], status, raw[:300])
            if expected is not None:
                assert status == expected, (i, body[:200], status, raw[:300])
            error = json.loads(raw)["error"]
            assert error["message"] and error["code"] == status, (body[:200], error)
            if param is not None and status == 400 and error["param"] is not None:
                assert error["param"] == param, (body[:200], error)
            if says is not None:
                assert says in error["message"], (body[:200], error)
            seen[status] = seen.get(status, 0) + 1
        # Unknown fields are ignored.
        status, _, raw = s.post("/v1/completions", {"prompt": "hi", "max_tokens": 2, "frobnicate": [1, {"x": None}]})
        assert status == 200, raw
        # Other routes' bad input, and no route at all.
        assert s.post("/tokenize", {"content": 5})[0] == 400
        assert s.post("/detokenize", {"tokens": [vocab]})[0] == 400
        assert s.post("/v1/attention", {"tokens": []})[0] == 400
        assert s.get("/v1/nothing")[0] == 404
        assert s.get("/health")[0] == 200
        status, _, raw = s.post("/v1/completions", {"prompt": "ROMEO:", "max_tokens": 5, "temperature": 0})
        assert status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 5, raw
    print(f"fuzz: {count} bad requests, answered {dict(sorted(seen.items()))}; the server stayed healthy")


if __name__ == "__main__":
    main()
