"""tests/serve/openai_client.py BRRR CHECKPOINT: the real `openai` package, pointed at brrr serve
by base_url, as any client would use it: completions, streamed and not, with logprobs.

The answers must agree with each other (a seeded request gives the same text and logprobs
streamed or not) and with the model: greedy's first token is the most likely alternative.
Skipped (exit 77) when the openai package is missing; scripts/test.sh refuses that skip.
"""
import math
import sys

from harness import Server, skip

try:
    import openai
except ImportError:
    skip("python3 cannot import openai (scripts/setup.sh installs it into .venv)")


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
