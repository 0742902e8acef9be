#!/usr/bin/env python3
"""tests/scripts/check_test_properties.py: the properties ctest holds for the tests are the ones
the CMake files meant to give them.

doctest_discover_tests (tests/CMakeLists.txt, brrr_discover_tests) passes its PROPERTIES on as one flat list, so a
value of two items, such as ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;BRRR_EMULATOR_SEED=2", loses its
second item without a word. Until 2026-11-28 that made the emulator's "seed 2" and "seed 3" tests
run seed 1's schedule again, and the 50-seed lab test run 10 seeds with no `slow` label. This
asks ctest itself (`ctest --show-only=json-v1`) what each test got:

  - every test has a label (scripts/test.sh picks tests by label; one without is never left out);
  - every "emulator (seed N): " test runs with BRRR_EMULATOR_SEED=N, and seeds 2 and 3 each
    cover every case of test_emulator that seed 1 runs ("emulator: ");
  - every "lab seeds (50): " test runs with BRRR_LAB_SEEDS=50 under a label that the sanitizer
    pass leaves out (one matching `slow`).

Usage: check_test_properties.py CTEST BUILD_DIR. Exit 0 when all hold, 1 with one line per fault.
"""
import json
import re
import subprocess
import sys


def environment(test):
    """The variables a test runs with: ENVIRONMENT's NAME=VALUE and ENVIRONMENT_MODIFICATION's
    NAME=set:VALUE (other operations are not used here and count as unknown)."""
    env = {}
    for prop in test.get("properties", []):
        values = prop["value"] if isinstance(prop["value"], list) else [prop["value"]]
        if prop["name"] == "ENVIRONMENT":
            for item in values:
                name, _, value = item.partition("=")
                env[name] = value
        elif prop["name"] == "ENVIRONMENT_MODIFICATION":
            for item in values:
                name, _, op = item.partition("=")
                env[name] = op[len("set:"):] if op.startswith("set:") else "?" + op
    return env


def labels(test):
    for prop in test.get("properties", []):
        if prop["name"] == "LABELS":
            return prop["value"]
    return []


def faults(tests):
    out = []
    seed1 = set()
    seeded = {}
    for t in tests:
        name = t["name"]
        if not labels(t):
            out.append(f"{name}: no label")
        m = re.match(r"emulator \(seed (\d+)\): ?(.*)", name)
        if m:
            seed, case = m.group(1), m.group(2)
            seeded.setdefault(seed, set()).add(case)
            got = environment(t).get("BRRR_EMULATOR_SEED")
            if got != seed:
                out.append(f"{name}: runs with BRRR_EMULATOR_SEED={got}, not {seed}")
        elif name.startswith("emulator:") and t.get("command", [""])[0].endswith("/test_emulator"):
            seed1.add(name[len("emulator:"):].lstrip())  # test_emulator's own cases, not the CLI runs beside them
        if name.startswith("lab seeds (50):"):
            got = environment(t).get("BRRR_LAB_SEEDS")
            if got != "50":
                out.append(f"{name}: runs with BRRR_LAB_SEEDS={got}, not 50")
            if not any("slow" in label for label in labels(t)):
                out.append(f"{name}: labels {labels(t)}: none has `slow`, so the sanitizer pass runs it")
    if not seed1:
        out.append("no `emulator:` tests of test_emulator: is this a build folder with the tests?")
    for seed in ("2", "3"):
        missing = sorted(seed1 - seeded.get(seed, set()))
        if missing:
            out.append(f"seed {seed} lacks {len(missing)} of seed 1's emulator tests, e.g. {missing[0]}")
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-2])
    ctest, build = sys.argv[1], sys.argv[2]
    shown = subprocess.run([ctest, "--show-only=json-v1"], cwd=build, capture_output=True, text=True, check=True)
    tests = json.loads(shown.stdout)["tests"]
    found = faults(tests)
    for line in found:
        print(line)
    print(f"check_test_properties: {len(tests)} tests, {len(found)} faults")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
