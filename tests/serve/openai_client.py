"""tests/serve/openai_client.py BRRR CHECKPOINT: the real `openai` package, pointed at brrr serve
by base_url, as any client would use it: completions, streamed and not, with logprobs, and
prompt in each of its forms (a string, strings, token ids, lists of token ids) with n.

The answers must agree with each other (a seeded request gives the same text and logprobs
streamed or not) and with the model: greedy's first token is the most likely alternative.
Skipped (exit 77) when the openai package is missing; scripts/test.sh refuses that skip.
"""
import json
import math
import random
import sys

from harness import Server, skip

try:
    import openai
except ImportError:
    skip("python3 cannot import openai (scripts/setup.sh installs it into .venv)")


def several_prompts(client, model, s):
    """prompt in each of OpenAI's forms; lm-eval's scoring request (token id lists, echo,
    logprobs, max_tokens 1 or 0); n; a batch streamed; a prompt longer than the context."""
    texts = ["ROMEO:", "JULIET: O Romeo, Romeo!", "First Citizen:\nBefore we proceed", "a"]
    ids = []
    for t in texts:
        status, _, raw = s.post("/tokenize", {"content": t}, headers={"Authorization": "Bearer test-key"})
        assert status == 200, raw
        ids.append(json.loads(raw)["tokens"])

    def score(prompt, max_tokens=1):
        return client.completions.create(model=model, prompt=prompt, echo=True, logprobs=1, max_tokens=max_tokens,
                                          temperature=0)

    alone = [score(p) for p in ids]
    for form in (ids, texts):
        batch = score(form)
        assert [c.index for c in batch.choices] == list(range(len(ids))), batch.choices
        for c, a in zip(batch.choices, alone):
            mine = a.choices[0]
            # The same bits as the prompt alone: the scheduler's steps are batch-invariant.
            assert c.text == mine.text and c.logprobs.token_logprobs == mine.logprobs.token_logprobs, (c, mine)
            assert c.logprobs.top_logprobs == mine.logprobs.top_logprobs
        assert batch.usage.prompt_tokens == sum(len(p) for p in ids), batch.usage
        assert batch.usage.completion_tokens == len(ids), batch.usage
    for c, p, t in zip(score(ids, max_tokens=0).choices, ids, texts):
        assert c.text == t and c.finish_reason == "length", c
        lp = c.logprobs
        assert len(lp.tokens) == len(p) and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None, lp
        assert all(v <= 0 for v in lp.token_logprobs[1:]), lp
        assert all(isinstance(d, dict) and len(d) == 1 for d in lp.top_logprobs[1:]), lp

    # 64 prompts of random ids in one request (the default --queue holds them beside the free
    # slots): each choice the bits of its prompt alone.
    rng = random.Random(64)
    many = [[rng.randrange(60) for _ in range(rng.randrange(1, 40))] for _ in range(64)]
    batch = score(many)
    assert [c.index for c in batch.choices] == list(range(64))
    for c, p in zip(batch.choices, many):
        mine = score(p).choices[0]
        assert c.logprobs.token_logprobs == mine.logprobs.token_logprobs and c.text == mine.text, (p, c, mine)
    assert batch.usage.prompt_tokens == sum(len(p) for p in many), batch.usage

    # n completions of each prompt: choice i * n + j; completion 0 of each is the prompt's alone.
    sampled = dict(model=model, max_tokens=6, temperature=1.0, seed=9, logprobs=1)
    r = client.completions.create(prompt=texts[:2], n=3, **sampled)
    assert [c.index for c in r.choices] == list(range(6)), r.choices
    for i, t in enumerate(texts[:2]):
        one = client.completions.create(prompt=t, **sampled).choices[0]
        assert r.choices[3 * i].text == one.text, (r.choices[3 * i], one)
    texts_by_index = {}
    usage = None
    for chunk in client.completions.create(prompt=texts[:2], n=3, stream=True, stream_options={"include_usage": True},
                                           **sampled):
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            texts_by_index[c.index] = texts_by_index.get(c.index, "") + c.text
    assert texts_by_index == {c.index: c.text for c in r.choices}, (texts_by_index, r.choices)
    assert usage is not None and usage.completion_tokens == r.usage.completion_tokens, usage

    # A prompt past the context: BadRequestError naming which one and the context.
    status, _, raw = s.request("GET", "/v1/models", headers={"Authorization": "Bearer test-key"})
    n_ctx = json.loads(raw)["data"][0]["meta"]["n_ctx"]
    try:
        score([[1, 2], [3], [4, 5, 6], [7] * (n_ctx + 10)])
        raise AssertionError("a prompt longer than the context was accepted")
    except openai.BadRequestError as e:
        assert f"prompt[3] has {n_ctx + 10} tokens; the model's context is {n_ctx} tokens" in str(e), e


def main():
    brrr, checkpoint = sys.argv[1], sys.argv[2]
    with Server(brrr, checkpoint, "--slots", "4", "--api-key", "test-key") as s:
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="test-key")
        models = client.models.list()
        model = models.data[0].id

        whole = client.completions.create(model=model, prompt="ROMEO:", max_tokens=12, temperature=0.8, seed=5,
                                          logprobs=3)
        choice = whole.choices[0]
        assert whole.object == "text_completion", whole
        assert whole.usage.completion_tokens == 12, whole.usage
        assert len(choice.logprobs.tokens) == 12
        assert "".join(choice.logprobs.tokens) == choice.text, (choice.logprobs.tokens, choice.text)
        for lp, top in zip(choice.logprobs.token_logprobs, choice.logprobs.top_logprobs):
            assert lp <= 0 and len(top) >= 1
        # The alternatives are probabilities of one distribution: they sum to at most 1.
        assert sum(math.exp(v) for v in choice.logprobs.top_logprobs[0].values()) <= 1 + 1e-5

        text, logprobs, usage = "", [], None
        for chunk in client.completions.create(model=model, prompt="ROMEO:", max_tokens=12, temperature=0.8, seed=5,
                                               logprobs=3, stream=True, stream_options={"include_usage": True}):
            if chunk.usage is not None:
                usage = chunk.usage
            for c in chunk.choices:
                text += c.text
                if c.logprobs is not None:
                    logprobs += c.logprobs.token_logprobs
        assert text == choice.text, (text, choice.text)
        assert logprobs == choice.logprobs.token_logprobs
        assert usage is not None and usage.completion_tokens == 12, usage

        greedy = client.completions.create(model=model, prompt="JULIET:", max_tokens=5, temperature=0, logprobs=1)
        g = greedy.choices[0].logprobs
        first_best = max(g.top_logprobs[0].items(), key=lambda kv: kv[1])
        assert first_best[0] == g.tokens[0] and first_best[1] == g.token_logprobs[0], (first_best, g)

        several_prompts(client, model, s)

        # A wrong key is refused the way the client expects: AuthenticationError.
        try:
            openai.OpenAI(base_url=s.url + "/v1", api_key="wrong").completions.create(model=model, prompt="a")
            raise AssertionError("a wrong API key was accepted")
        except openai.AuthenticationError:
            pass
        # A bad field: BadRequestError, whose message names it.
        try:
            client.completions.create(model=model, prompt="a", max_tokens=-3)
            raise AssertionError("max_tokens -3 was accepted")
        except openai.BadRequestError as e:
            assert "max_tokens" in str(e), e
    print("openai client: completions, streamed and not, with logprobs: OK")


if __name__ == "__main__":
    main()
