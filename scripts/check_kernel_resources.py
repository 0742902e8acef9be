#!/usr/bin/env python3
"""scripts/check_kernel_resources.py: what every CUDA kernel asks of an H100, without an H100.

Chapter 10 (the GPU and the emulator). The emulator runs a kernel's source but knows nothing of
registers: a kernel can pass every emulator test and still fail to launch on a GPU ("too many
resources requested for launch") or run slowly because ptxas spilled registers to memory. This
compiles every CUDA kernel file for sm_90 (sm_90a for a file that uses Hopper's instructions,
simt_hopper.h) with `nvcc -Xptxas -v` (the flags of the real build,
from compile_commands.json) and reads what ptxas says of each kernel:

  - spills: any spill store or load fails (the kernel needs more registers than it got);
  - registers x threads per block above 65,536 fails (an SM has 64 K registers; a block must
    fit). The block size is the kernel's __launch_bounds__ (from the PTX's .maxntid) or, for a
    kernel without one, 1024, the largest block brrr may launch: a kernel that needs more than
    64 registers must say its largest block with __launch_bounds__, so ptxas fits it;
  - static shared memory above 48 KiB fails (more must be dynamic, after an opt-in).

    scripts/check_kernel_resources.py build        # every file; exit 1 on any failure
    scripts/check_kernel_resources.py build -v     # print every kernel's figures

Findings that are known and explained are listed in scripts/kernel_resources_known.txt (one
"kernel name prefix | reason" a line): they are printed, not failed, so the check fails only
on what is new.

ctest runs it (label `ptxas`) when the build has CUDA.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

REGISTERS_PER_SM = 65536
MAX_STATIC_SHARED = 48 * 1024
DEFAULT_MAX_THREADS = 1024


def kernel_commands(build):
    """(source, nvcc command) for every .cu the build compiles with nvcc that includes simt.h."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    commands = []
    for entry in entries:
        source = entry["file"]
        if not source.endswith(".cu") or "nvcc" not in entry["command"].split()[0]:
            continue
        with open(source) as f:
            if '#include "kernels/cuda/simt.h"' not in f.read():
                continue
        commands.append((source, entry))
    return sorted(commands)


def compile_for_sm90(source, entry, folder):
    """ptxas's report and the PTX of one file, compiled for sm_90 only.

    `-cubin` stops after the device code: the host half of the file (the other half of nvcc's
    time) is the build's business, and ptxas's report is all this needs. On the 2-core machine,
    alone, the whole check took 120 s as a full `-c` compile and 51 s this way (2026-11-28)."""
    words = shlex.split(entry["command"])
    kept = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word == "-o":
            skip = True
            continue
        if word.startswith("--generate-code") or word.startswith("-gencode") or word.startswith("-arch"):
            continue
        if word == "-c":
            continue
        kept.append(word)
    base = os.path.join(folder, os.path.basename(source))
    # Hopper's wgmma and setmaxnreg exist on sm_90a only; for plain sm_90 simt_hopper.h compiles
    # them to traps, which would hide the kernel's real registers. So such a file is checked as
    # sm_90a, the target it runs as (cmake/BrrrCuda.cmake).
    with open(source) as f:
        hopper = '#include "kernels/cuda/simt_hopper.h"' in f.read()
    kept += ["-cubin", "-arch=sm_90a" if hopper else "-arch=sm_90", "-Xptxas", "-v", "--keep", "--keep-dir", folder, "-o", base + ".cubin"]
    result = subprocess.run(kept, cwd=entry["directory"], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError("%s: nvcc failed:\n%s" % (source, result.stderr[-3000:]))
    ptx = ""
    for name in os.listdir(folder):
        if name.endswith(".ptx") and name.startswith(os.path.basename(source).rsplit(".", 1)[0]):
            with open(os.path.join(folder, name)) as f:
                ptx += f.read()
    return result.stderr + result.stdout, ptx


def parse(report, ptx):
    """{mangled name: {registers, spill_stores, spill_loads, shared, max_threads}}."""
    kernels = {}
    current = None
    for line in report.splitlines():
        m = re.search(r"Compiling entry function '([^']+)' for 'sm_90a?'", line)
        if m:
            current = kernels.setdefault(m.group(1), {"registers": 0, "spill_stores": 0, "spill_loads": 0,
                                                      "shared": 0, "max_threads": None})
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            current["spill_stores"], current["spill_loads"] = int(m.group(1)), int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            current["shared"] = int(s.group(1)) if s else 0
            current = None  # the last line of an entry's report
    # .entry NAME( ... ) .maxntid X, Y, Z
    for m in re.finditer(r"\.entry\s+(\S+?)\s*\((.*?)\)\s*((?:\.\w+[^{]*?)*)\{", ptx, re.S):
        name, directives = m.group(1), m.group(3)
        t = re.search(r"\.maxntid\s+(\d+)(?:,\s*(\d+))?(?:,\s*(\d+))?", directives)
        if name in kernels and t:
            threads = 1
            for g in t.groups():
                if g:
                    threads *= int(g)
            kernels[name]["max_threads"] = threads
    return kernels


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
        return dict(zip(names, out.splitlines()))
    except OSError:
        return {n: n for n in names}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build", help="a CMake build folder with CUDA on (holds compile_commands.json)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every kernel's figures")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--only", help="only files whose path contains this")
    args = parser.parse_args()

    commands = [c for c in kernel_commands(args.build) if not args.only or args.only in c[0]]
    if not commands:
        sys.exit("check_kernel_resources: no nvcc-compiled kernel files in %s/compile_commands.json "
                 "(configure with CUDA on)" % args.build)
    results = {}
    with tempfile.TemporaryDirectory(prefix="brrr-ptxas-") as temporary:
        def one(item):
            source, entry = item
            folder = os.path.join(temporary, source.strip("/").replace("/", "_"))
            os.makedirs(folder)
            return source, parse(*compile_for_sm90(source, entry, folder))
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for source, kernels in pool.map(one, commands):
                results[source] = kernels

    names = demangle([n for kernels in results.values() for n in kernels])
    failures = []
    count = 0
    for source, kernels in results.items():
        for name, k in sorted(kernels.items()):
            count += 1
            threads = k["max_threads"] or DEFAULT_MAX_THREADS
            # Registers are allocated per warp in units of 256: per thread, a multiple of 8.
            per_thread = (k["registers"] + 7) // 8 * 8
            readable = names.get(name, name)
            where = "%s: %s" % (os.path.relpath(source, os.path.join(os.path.dirname(__file__), "..")), readable)
            short = re.sub(r"^void |brrr::kernels::cuda::|\(.*$", "", readable)
            if args.verbose:
                print("%-20s %-48.48s %3d registers, %6d bytes shared, %s threads%s" % (
                    os.path.basename(source), short, k["registers"], k["shared"],
                    k["max_threads"] if k["max_threads"] else "<=1024 (no __launch_bounds__)",
                    ", SPILLS" if k["spill_stores"] or k["spill_loads"] else ""))
            if k["spill_stores"] or k["spill_loads"]:
                failures.append("%s: spills registers (%d bytes of spill stores, %d of loads): fewer live values, "
                                "or a larger register budget (__launch_bounds__ with fewer threads)" % (
                                    where, k["spill_stores"], k["spill_loads"]))
            if per_thread * threads > REGISTERS_PER_SM:
                failures.append("%s: %d registers x %d threads = %d > %d registers of an SM: %s" % (
                    where, k["registers"], threads, per_thread * threads, REGISTERS_PER_SM,
                    "a block of that size cannot launch" if k["max_threads"] else
                    "without __launch_bounds__ a 1024-thread launch fails; add __launch_bounds__(largest block)"))
            if k["shared"] > MAX_STATIC_SHARED:
                failures.append("%s: %d bytes of static shared memory, above the 48 KiB a kernel may declare" % (
                    where, k["shared"]))
    known = []
    known_file = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel_resources_known.txt")
    if os.path.exists(known_file):
        with open(known_file) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    prefix, _, reason = line.partition("|")
                    known.append((prefix.strip(), reason.strip()))
    new = []
    for failure in failures:
        reason = next((r for p, r in known if p in failure), None)
        if reason:
            print("KNOWN " + failure + " [" + reason + "]")
        else:
            new.append(failure)
            print("FAIL " + failure)
    print("%d kernels in %d files checked for sm_90: %s" % (
        count, len(results), "all fit" if not failures else "%d problems (%d known)" % (len(failures),
                                                                                      len(failures) - len(new))))
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
