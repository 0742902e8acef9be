#!/usr/bin/env python3
"""scripts/deletion_study.py: does the emulator notice a missing __syncthreads?

Chapter 10 (the GPU and the emulator). For each __syncthreads() that the emulator runs (every
one in kernels/cuda outside `#if !BRRR_EMULATOR` blocks), this deletes it in a temporary copy
of the source tree, rebuilds the emulator's test program there and runs the emulator's tests
(under seeds 1, 2 and 3, stopping at the first failure). A deletion is *caught* when a test
fails. Each deletion the tests do not notice is a barrier the tests cannot tell is needed:
either the barrier is redundant, or the checks are too weak.

    scripts/deletion_study.py                      # every site (about an hour on 2 cores)
    scripts/deletion_study.py --only reduce.cu     # the sites of one file (or several: a,b)
    scripts/deletion_study.py --work /tmp/study    # keep the copy and its build there

The copy is configured without CUDA (only g++ builds the emulated kernels) and builds only
test_emulator. The source tree itself is never modified.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALL = re.compile(r"__syncthreads\(\)")


def emulated_sites(root):
    """(relative path, line number) of every __syncthreads() call the emulator runs."""
    sites = []
    folder = os.path.join(root, "kernels", "cuda")
    for name in sorted(os.listdir(folder)):
        if not name.endswith((".cu", ".h")) or name == "simt.h":
            continue
        path = os.path.join(folder, name)
        gpu_only = []  # for each open #if: does it exclude the emulator?
        with open(path) as f:
            for number, line in enumerate(f, 1):
                stripped = line.strip()
                if stripped.startswith("#if"):
                    gpu_only.append("!BRRR_EMULATOR" in stripped.replace(" ", ""))
                elif stripped.startswith("#else") and gpu_only:
                    gpu_only[-1] = not gpu_only[-1]
                elif stripped.startswith("#endif") and gpu_only:
                    gpu_only.pop()
                code = line.split("//", 1)[0]
                if CALL.search(code) and not any(gpu_only):
                    sites.append((os.path.relpath(path, root), number))
    return sites


def run(command, cwd, env=None, quiet=True):
    return subprocess.run(command, cwd=cwd, env=env, text=True, capture_output=quiet)


def copy_tree(root, work):
    files = run(["git", "ls-files", "-z"], root).stdout.split("\0")
    for relative in filter(None, files):
        source = os.path.join(root, relative)
        if not os.path.isfile(source):
            continue
        target = os.path.join(work, "src", relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(source, target)


def build(work, jobs):
    result = run(["cmake", "--build", "build", "-j", str(jobs), "--target", "test_emulator"], work)
    return result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def first_failure(work, seeds):
    """The first failing check's message under any of the seeds, or None when all pass."""
    program = os.path.join(work, "build", "tests", "emulator", "test_emulator")
    for seed in seeds:
        env = dict(os.environ, BRRR_EMULATOR_SEED=str(seed), OMP_WAIT_POLICY="PASSIVE")
        result = run([program, "--abort-after=1", "--no-version"], work, env)
        if result.returncode not in (0, 77):  # 77: a test skipped (tests/skip.h), none failed
            lines = [l for l in result.stdout.splitlines() if "ERROR" in l or "THREW" in l or "CRASHED" in l]
            return "seed %d: %s" % (seed, (lines[0] if lines else result.stdout[-300:]).strip())
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", help="folder for the copy and its build (default: a temporary one)")
    parser.add_argument("--only", help="only sites in files whose name contains one of these (comma-separated)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--seeds", default="1,2,3")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]

    sites = emulated_sites(ROOT)
    if args.only:
        sites = [s for s in sites if any(part in s[0] for part in args.only.split(","))]
    if not sites:
        sys.exit("deletion_study: no __syncthreads() sites to delete")
    work = args.work or tempfile.mkdtemp(prefix="brrr-deletion-")
    print("deletion study: %d emulated __syncthreads() sites; copy and build in %s" % (len(sites), work), flush=True)
    if not os.path.isdir(os.path.join(work, "src")):
        copy_tree(ROOT, work)
    configure = ["cmake", "-S", "src", "-B", "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DBRRR_CUDA=OFF",
                 "-DBRRR_BENCH=OFF", "-DBRRR_SHARED=OFF"]
    if run(configure, work).returncode != 0:
        sys.exit("deletion_study: cmake failed in %s" % work)
    ok, log = build(work, args.jobs)
    if not ok:
        sys.exit("deletion_study: the unmodified copy does not build:\n" + log)
    failure = first_failure(work, seeds)
    if failure:
        sys.exit("deletion_study: the unmodified copy fails its tests: " + failure)

    caught = 0
    rows = []
    for relative, number in sites:
        path = os.path.join(work, "src", relative)
        with open(path) as f:
            original = f.read()
        lines = original.split("\n")
        lines[number - 1] = CALL.sub("(void)0 /* __syncthreads() deleted */", lines[number - 1], count=1)
        with open(path, "w") as f:
            f.write("\n".join(lines))
        start = time.time()
        try:
            ok, log = build(work, args.jobs)
            verdict = first_failure(work, seeds) if ok else "does not build: " + log.strip().splitlines()[-1]
        finally:
            with open(path, "w") as f:
                f.write(original)
        site = "%s:%d" % (os.path.basename(relative), number)
        rows.append((site, verdict))
        caught += verdict is not None
        print("%-22s %-8s %5.0f s  %s" % (site, "caught" if verdict else "MISSED", time.time() - start,
                                          (verdict or "")[:220]), flush=True)
    print("\n%d of %d deletions caught" % (caught, len(sites)))
    for site, verdict in rows:
        if verdict is None:
            print("missed: " + site)
    build(work, args.jobs)  # leave the copy's build matching its sources
    return 0 if caught == len(sites) else 1


if __name__ == "__main__":
    sys.exit(main())
