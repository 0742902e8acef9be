#!/usr/bin/env python3
"""scripts/check_required_tests.py: after ctest, fail when a test that CI must run did not run.

A test that cannot run here (no tiktoken, no torch, no cppyy, no AVX-512 or AVX512-BF16) reports itself as
Skipped (tests/skip.h), which ctest counts as a success. On CI that would hide a broken
setup: the tiktoken interop, the PyTorch references, the notebooks, the digits CNN and the
AVX-512 GEMM must run. This reads ctest's output (scripts/test.sh tees it to a file) and checks
that every test matching a required pattern ran and passed, and that each pattern matched at least one test.

    scripts/check_required_tests.py build/ctest.log
    scripts/check_required_tests.py --self-test      # shows the check catches a skipped test

Exit status 0 when all required tests ran, 1 otherwise (naming each that did not).
"""
import re
import sys

# (pattern on the test's name, why CI needs it, whether it applies on this machine)
def cpu_has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return re.search(r"\bavx512f\b", f.read()) is not None
    except OSError:
        return False


def cpu_has_avx512_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            return re.search(r"\bavx512_bf16\b", f.read()) is not None
    except OSError:
        return False


REQUIRED = [
    (r"^tokenizer: ?tiktoken: identical ids", "tiktoken interop (the .venv's tiktoken)", lambda: True),
    (r"^models: ?the GPT matches PyTorch at other shapes", "the PyTorch reference files made now", lambda: True),
    (r"^models: ?a brrr checkpoint loads in PyTorch", "a checkpoint read by PyTorch", lambda: True),
    (r"^models: ?hf: ", "Hugging Face GPT-2 folders made by transformers and tokenizers (the .venv's)", lambda: True),
    (r"^core: ?bfloat16 safetensors: brrr writes BF16 that PyTorch reads", "bf16 files read by PyTorch", lambda: True),
    (r"^train: ?lab baseline: the bf16 baselines agree with PyTorch", "the kernel lab's bf16 baselines beside PyTorch's",
     lambda: True),
    (r"^notebook: ?", "the notebooks (cppyy, nbclient in .venv)", lambda: True),
    (r"^models(_slow)?: ?cnn: ", "the handwritten digits (python3-sklearn) and the CNN against PyTorch", lambda: True),
    (r"^core: ?blocked matmul", "the AVX-512 GEMM on a CPU that has AVX-512", cpu_has_avx512),
    (r"^distributed: ?", "data-parallel training under mpirun (Debian's openmpi-bin, libopenmpi-dev)", lambda: True),
    (r"^serve: ?the openai package", "brrr serve with the real openai client (the .venv's openai)", lambda: True),
    (r"^serve: ?fuzz: ", "brrr serve under thousands of bad requests", lambda: True),
    (r"^serve: ?Hugging Face GPT-2 folders", "brrr serve against transformers' greedy generate (the .venv's)",
     lambda: True),
    (r"^serve: ?the page in headless Chromium", "brrr serve's page in Chromium (chromium-driver, the .venv's selenium)",
     lambda: True),
    (r"^docs$", "the course pages rendered in headless Chromium (Debian's chromium)", lambda: True),
    (r"^core: ?bf16 matmul: avx512bf16 and plain agree", "the AVX512-BF16 GEMM where the CPU has it",
     cpu_has_avx512_bf16),
]

# "  12/247 Test  #12: tokenizer: tiktoken: identical ids ...   Passed    0.51 sec"
# "  13/247 Test  #13: notebook: 01-tensors ......................***Skipped   0.20 sec"
# (The suites' prefix is "core: ", which ctest shows as "core:"; the patterns allow both.)
RESULT = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (.*?) \.+\s*\**(\S.*?)\s+[\d.]+ sec\s*$")


def results(lines):
    """{test name: status} from ctest's output."""
    out = {}
    for line in lines:
        m = RESULT.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def check(lines, required=REQUIRED):
    """The problems: one line for each required test that did not run and pass."""
    ran = results(lines)
    problems = []
    for pattern, why, applies in required:
        if not applies():
            continue
        matched = {name: status for name, status in ran.items() if re.search(pattern, name)}
        if not matched:
            problems.append(f"no test matches /{pattern}/ ({why}): was it built and run?")
        for name, status in sorted(matched.items()):
            if status != "Passed":
                problems.append(f"{name}: {status}, but CI must run it ({why})")
    return problems


def self_test():
    log = [
        "  1/4 Test  #1: tokenizer: tiktoken: identical ids with brrr's ranks and the GPT-2 pattern ...   Passed    0.51 sec",
        "  2/4 Test  #2: notebook: 01-tensors ...............***Skipped   0.20 sec",
        "  3/4 Test  #3: models: the GPT matches PyTorch at other shapes (reference files) ...   Passed    2.00 sec",
        "  4/4 Test  #4: core: blocked matmul agrees with naive on ragged sizes ...***Failed    1.00 sec",
    ]
    problems = check(log)
    assert any("notebook: 01-tensors: Skipped" in p for p in problems), problems
    assert any("a brrr checkpoint loads in PyTorch" in p and "no test matches" in p for p in problems), problems
    assert not any("tiktoken" in p for p in problems), problems
    assert any("blocked matmul" in p for p in problems) == cpu_has_avx512(), problems
    everything = [l.replace("***Skipped", "   Passed").replace("***Failed", "   Passed") for l in log]
    everything.append("  5/9 Test  #5: models: a brrr checkpoint loads in PyTorch and gives the same logits ..   Passed   1.0 sec")
    everything.append("  6/9 Test  #6: models: cnn: brrr cnn reaches 97% on the held-out digits and writes its PNGs ..   Passed   5.0 sec")
    everything.append("  7/9 Test  #7: distributed: ZeRO stage 1 gives the unsharded run's bits ..   Passed   3.0 sec")
    everything.append("  8/9 Test  #8: core: bfloat16 safetensors: brrr writes BF16 that PyTorch reads as bfloat16, and "
                      "reads PyTorch's ..   Passed   1.0 sec")
    everything.append("  9/9 Test  #9: core: bf16 matmul: avx512bf16 and plain agree bit for bit, and neither depends on "
                      "the thread count ..   Passed   1.0 sec")
    everything.append("  10/10 Test #10: docs ......................   Passed   120.0 sec")
    everything.append("  11/11 Test #11: models: hf: tokenizer ids equal Hugging Face's on prose, code, Unicode and "
                      "whitespace runs ..   Passed   1.0 sec")
    everything.append("  12/13 Test #12: serve: the openai package: completions, streamed and not, with logprobs ..   Passed"
                      "   9.0 sec")
    everything.append("  13/13 Test #13: serve: fuzz: 3000 bad requests are each a 4xx with an error, and the server "
                      "stays healthy ..   Passed   9.0 sec")
    everything.append("  15/15 Test #15: serve: Hugging Face GPT-2 folders continue as transformers' greedy generate ..  "
                      " Passed   9.0 sec")
    everything.append("  14/14 Test #14: serve: the page in headless Chromium: type, stream, hover, inspect, stop, no "
                      "console error ..   Passed   9.0 sec")
    everything.append("  16/16 Test #16: train: lab baseline: the bf16 baselines agree with PyTorch's bf16 matmul and "
                      "attention on the same inputs ..   Passed   2.0 sec")
    assert check(everything) == [], check(everything)
    print("self-test: a skipped, a failed and a missing required test are each reported; all passing is clean")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    with open(argv[1], errors="replace") as f:
        problems = check(f.read().splitlines())
    if problems:
        print("required tests that did not run (scripts/check_required_tests.py):")
        for p in problems:
            print("  " + p)
        return 1
    print("required tests: all ran and passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
