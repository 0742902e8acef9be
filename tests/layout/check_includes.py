#!/usr/bin/env python3
"""tests/layout/check_includes.py [ROOT]: brrr's dependencies point one way.

The folders are layers, and a file may include only files of its own layer or of the layers
below it:

    base  <-  kernels  <-  framework  <-  models, tokenizer  <-  train, lab, serve  <-  exercises  <-  apps

(models and tokenizer do not include each other, nor do train, lab and serve.) Every #include "..."
of every source file under those folders is resolved the way the build resolves it (the
including file's folder, then the include roots) and checked; an include that resolves to
nothing in the repository (a system or third-party header) is not brrr's business here.
Prints each violation as FILE:LINE: LAYER includes PATH (LAYER) and exits 1 if there is one.
`--self-test` plants a violation in a scratch tree and checks that it is reported.
"""
import os
import re
import sys
import tempfile

# (layer, folder) from the bottom up; the layers a layer may include.
LAYERS = {
    "base": {"base"},
    "kernels": {"base", "kernels"},
    "framework": {"base", "kernels", "framework"},
    "models": {"base", "kernels", "framework", "models"},
    "tokenizer": {"base", "kernels", "framework", "tokenizer"},
    "train": {"base", "kernels", "framework", "models", "tokenizer", "train"},
    "lab": {"base", "kernels", "framework", "models", "tokenizer", "lab"},
    "serve": {"base", "kernels", "framework", "models", "tokenizer", "serve"},
    "exercises": {"base", "kernels", "framework", "models", "tokenizer", "train", "lab", "exercises"},
    "apps": {"base", "kernels", "framework", "models", "tokenizer", "train", "lab", "serve", "exercises", "apps"},
}
INCLUDE_ROOTS = ["base/include", "kernels/include", "framework/include", "models/include", "tokenizer/include", ""]
SOURCE = re.compile(r"\.(h|hpp|cpp|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(relpath):
    top = relpath.split("/", 1)[0]
    return top if top in LAYERS else None


def resolve(root, including, name):
    for base in [os.path.dirname(including)] + [os.path.join(root, r) for r in INCLUDE_ROOTS]:
        path = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(path):
            return path
    return None


def violations(root):
    found = []
    for layer in LAYERS:
        for folder, _, files in os.walk(os.path.join(root, layer)):
            for f in sorted(files):
                if not SOURCE.search(f):
                    continue
                path = os.path.join(folder, f)
                with open(path, encoding="utf-8", errors="replace") as src:
                    for number, line in enumerate(src, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = resolve(root, path, m.group(1))
                        if not target:
                            continue
                        target_layer = layer_of(os.path.relpath(target, root))
                        if target_layer and target_layer not in LAYERS[layer]:
                            found.append(f"{os.path.relpath(path, root)}:{number}: {layer} includes "
                                         f"{os.path.relpath(target, root)} ({target_layer})")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        for d in ("base/include/brrr", "kernels", "framework/include/brrr"):
            os.makedirs(os.path.join(root, d))
        with open(os.path.join(root, "framework/include/brrr/tensor.h"), "w") as f:
            f.write("#pragma once\n")
        with open(os.path.join(root, "base/include/brrr/dtype.h"), "w") as f:
            f.write("#pragma once\n")
        with open(os.path.join(root, "kernels/good.cpp"), "w") as f:
            f.write('#include "brrr/dtype.h"\n#include <vector>\n')
        with open(os.path.join(root, "kernels/bad.cpp"), "w") as f:
            f.write('#include "brrr/dtype.h"\n#include "brrr/tensor.h"\n')
        found = violations(root)
        expected = ["kernels/bad.cpp:2: kernels includes framework/include/brrr/tensor.h (framework)"]
        if found != expected:
            print(f"self-test FAILED: expected {expected}, got {found}")
            return 1
        print("self-test: a kernel including a framework header is reported")
        return 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), "..", ".."))
    found = violations(root)
    for v in found:
        print(v)
    print(f"{len(found)} include(s) against the direction base <- kernels <- framework <- models, tokenizer "
          f"<- train, lab, serve <- exercises <- apps" if found else "every #include points down the layers")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
