#!/usr/bin/env python3
"""tests/layout/check_includes.py [ROOT]: brrr's dependencies point one way.

The folders are layers, and a file may include only files of its own layer or of the layers
below it:

    base  <-  kernels, plot  <-  framework  <-  models, tokenizer  <-  train, lab, serve  <-  exercises  <-  apps

(kernels and plot do not include each other, nor do models and tokenizer, nor train, lab and
serve: plot draws plain numbers and knows no tensors.) Every #include "..."
of every source file under those folders is resolved the way the build resolves it (the
including file's folder, then the include roots) and checked; an include that resolves to
nothing in the repository (a system or third-party header) is not brrr's business here.
Prints each violation as FILE:LINE: LAYER includes PATH (LAYER) and exits 1 if there is one.
`--self-test` plants a violation in a scratch tree and checks that it is reported.
"""
import os
import re
import sys

import layout_check

# (layer, folder) from the bottom up; the layers a layer may include.
LAYERS = {
    "base": {"base"},
    "kernels": {"base", "kernels"},
    "plot": {"base", "plot"},
    "framework": {"base", "kernels", "plot", "framework"},
    "models": {"base", "kernels", "plot", "framework", "models"},
    "tokenizer": {"base", "kernels", "plot", "framework", "tokenizer"},
    "train": {"base", "kernels", "plot", "framework", "models", "tokenizer", "train"},
    "lab": {"base", "kernels", "plot", "framework", "models", "tokenizer", "lab"},
    "serve": {"base", "kernels", "plot", "framework", "models", "tokenizer", "serve"},
    "exercises": {"base", "kernels", "plot", "framework", "models", "tokenizer", "train", "lab", "exercises"},
    "apps": {"base", "kernels", "plot", "framework", "models", "tokenizer", "train", "lab", "serve", "exercises", "apps"},
}
INCLUDE_ROOTS = ["base/include", "kernels/include", "plot/include", "framework/include", "models/include", "tokenizer/include", ""]
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
        for path in layout_check.sources(root, layer, SOURCE):
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
    files = {
        "base/include/brrr/dtype.h": "#pragma once\n",
        "framework/include/brrr/tensor.h": "#pragma once\n",
        "kernels/good.cpp": '#include "brrr/dtype.h"\n#include <vector>\n',
        "kernels/bad.cpp": '#include "brrr/dtype.h"\n#include "brrr/tensor.h"\n',
        "plot/include/brrr/plot.h": '#pragma once\n#include "brrr/dtype.h"\n',
        "plot/src/plot.cpp": '#include "brrr/plot.h"\n#include "brrr/tensor.h"\n',
    }
    expected = ["kernels/bad.cpp:2: kernels includes framework/include/brrr/tensor.h (framework)",
                "plot/src/plot.cpp:2: plot includes framework/include/brrr/tensor.h (framework)"]
    return layout_check.self_test(violations, files, expected,
                                  "a kernel and a plot including a framework header are reported")


def main():
    return layout_check.main(
        violations, self_test, passed="every #include points down the layers",
        failed=lambda n: f"{n} include(s) against the direction base <- kernels, plot <- framework <- models, "
                         f"tokenizer <- train, lab, serve <- exercises <- apps")


if __name__ == "__main__":
    sys.exit(main())
