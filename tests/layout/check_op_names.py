#!/usr/bin/env python3
"""tests/layout/check_op_names.py [ROOT]: each registry op is named once, and no name carries a precision.

The registry's ops are declared as typed descriptors (brrr/kernels.h's Op) in two files:
kernels/signatures.h (the kernels' ops) and framework/include/brrr/ops.h (the ops built from
ops, op_variants.cpp). Every registration and lookup goes through one of them, so an op's name
is written once in the repository. Three rules (issue 29, item 3):

  * each name is declared once: no two descriptors in those files share a name literal (a second
    descriptor of an op, in another dtype, takes the first one's name: op::matmul<float>.name);
  * no descriptor is made from a string literal anywhere else outside tests/ (declare it in
    kernels/signatures.h);
  * no name ends in `_bf16` or `_bf16_memory`: bf16 products are a slot of the op
    (op::matmul<float>.autocast(), "matmul:bf16"), bf16 data its dtype (op::matmul_on_bf16).

Comments are left out. Prints FILE:LINE: what for each violation and exits 1 if there is one.
`--self-test` plants one of each in a scratch tree and checks that all are reported, and that
the clean lines beside them are not.
"""
import os
import re
import sys

import layout_check

SOURCE = re.compile(r"\.(h|hpp|cpp|cu|cuh)$")
DECLARING = ("kernels/signatures.h", "framework/include/brrr/ops.h")
# `Op<matmul_fn<T>> matmul{"matmul", ...}` or `Op<Fn>{"name", ...}`: a descriptor from a literal
DESCRIPTOR = re.compile(r'\bOp\s*<[^;\n]*?>\s*\w*\s*\{\s*"([^"]*)"')
PRECISION_IN_NAME = re.compile(r"_bf16(_memory)?$")
SKIPPED = {"tests", "docs", "notebooks", "scripts"}  # test-only ops may declare their own


def without_comments(text):
    """text with // and /* */ comments blanked out (line numbers kept)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def source_files(root):
    for entry in sorted(os.listdir(root)):
        if entry.startswith(".") or entry.startswith("build") or entry in SKIPPED:
            continue
        if os.path.isdir(os.path.join(root, entry)):
            yield from layout_check.sources(root, entry, SOURCE)


def violations(root):
    found = []
    declared = {}  # name -> "FILE:LINE" of its first descriptor
    for path in source_files(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = without_comments(f.read())
        for m in DESCRIPTOR.finditer(text):
            name, line = m.group(1), text.count("\n", 0, m.start()) + 1
            where = f"{rel}:{line}"
            if rel not in DECLARING:
                found.append(f"{where}: a descriptor of '{name}' made from a string (declare the op once, in "
                             "kernels/signatures.h, and use that descriptor)")
                continue
            if name in declared:
                found.append(f"{where}: '{name}' is declared a second time (first at {declared[name]}): a "
                             "descriptor in another dtype takes the first one's .name")
            else:
                declared[name] = where
            if PRECISION_IN_NAME.search(name):
                found.append(f"{where}: op name '{name}' carries its precision (bf16 products: "
                             "op.autocast(), 'OP:bf16'; bf16 data: the op in dtype kBFloat16)")
    return found


def self_test():
    files = {
        "kernels/signatures.h":
            '// Op<fn> x{"commented_out"} is a comment\n'
            'template <class T> inline constexpr Op<matmul_fn<T>> matmul{"matmul", dtype_of<T>()};\n'
            'inline constexpr Op<matmul_on_bf16_fn> matmul_on_bf16{matmul<float>.name, kBFloat16};\n'
            'inline constexpr Op<matmul_fn<float>> matmul_bf16{"matmul_bf16", kFloat32};\n'
            'inline constexpr Op<matmul_fn<float>> again{"matmul", kFloat32};\n',
        "framework/include/brrr/ops.h":
            'inline constexpr kernels::Op<gelu_fn> gelu{"gelu", dtype_of<T>()};\n'
            'inline constexpr kernels::Op<attention_fn> attention{"attention_bf16_memory", kBFloat16};\n',
        "lab/cases.cpp": 'call(op::matmul<float>.autocast(), &f, op::matmul<float>.autocast(), &f);\n'
                         'const kernels::Op<kernels::unary_fn<float>> mine{"neg", kFloat32};\n',
        "tests/core/test_x.cpp": 'constexpr kernels::Op<kernels::unary_fn<float>> t{"test_op", kFloat32};\n',
    }
    expected = ["framework/include/brrr/ops.h:2", "kernels/signatures.h:4", "kernels/signatures.h:5",
                "lab/cases.cpp:2"]
    return layout_check.self_test(violations, files, expected,
                                  "a second declaration, a name with _bf16 or _bf16_memory and a descriptor "
                                  "from a string outside signatures.h are reported",
                                  key=lambda v: v.split(": ", 1)[0])


def main():
    return layout_check.main(
        violations, self_test,
        passed="each op is declared once, in kernels/signatures.h or brrr/ops.h, and no op name ends in "
               "_bf16 or _bf16_memory",
        failed=lambda n: f"{n} violation(s)")


if __name__ == "__main__":
    sys.exit(main())
