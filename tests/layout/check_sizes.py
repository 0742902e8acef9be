#!/usr/bin/env python3
"""tests/layout/check_sizes.py [ROOT]: no function reads longer than a few screens, no file longer
than a chapter's worth of code.

brrr is read as a course, so a reader should meet one idea at a time: every function outside
tests/ is at most MAX_FUNCTION lines (its signature to its closing brace), every source file
outside tests/ at most MAX_FILE lines. The exceptions are the files of numbered kernel variants,
which are long because each variant is one more paragraph of the same story (STYLE.md, llm.c's
dev/cuda), and files listed in TEMPORARY while someone splits them.

A function is found the way a reader finds one: with comments, strings and preprocessor lines
blanked out, a brace whose header (the text since the last ';', '{' or '}' of its scope) has a
parameter list is a function body, whether at namespace scope or inside a class; lambdas and
local classes count toward the function they are in. Prints each one over the limit as
FILE:LINE: NAME is N lines (at most MAX) and exits 1 if there is one.
`--self-test` plants a long function, a long method and a long file in a scratch tree and checks
that they, and nothing else there, are reported.
"""
import os
import re
import subprocess
import sys

import layout_check

MAX_FUNCTION = 150
MAX_FILE = 900
SOURCE = re.compile(r"(\.(h|hpp|c|cc|cpp|cu|cuh|py|sh|cmake)|(^|/)CMakeLists\.txt)$")
C_FAMILY = re.compile(r"\.(h|hpp|c|cc|cpp|cu|cuh)$")
# Numbered-variant kernel files (one long story each).
EXEMPT = {"kernels/cuda/attention/cuda_cores.cu", "kernels/cuda/attention/mma_sync.cu",
          "kernels/cuda/matmul/cuda_cores.cu", "kernels/cuda/matmul/mma_sync.cu"}
# Being split right now (issue 29, item 4); remove each when its split lands.
TEMPORARY = set()


def files(root):
    """Every source file outside tests/, as paths relative to root: git's list where root is a
    checkout (so build trees and virtual environments are never read), else a walk."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root, check=True, capture_output=True, text=True).stdout
        listed = out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        listed = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
            listed += [os.path.relpath(os.path.join(folder, n), root) for n in names]
    return sorted(p for p in listed if SOURCE.search(p) and not p.startswith("tests/")
                  and os.path.isfile(os.path.join(root, p)))


def blank(text):
    """text with comments, string and character literals and preprocessor lines replaced by
    spaces (newlines kept, so line numbers hold)."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#" or (line_start and c in " \t" and text[i:].lstrip(" \t").startswith("#")):
            # a preprocessor line, with its continuations
            j = i
            while j < n:
                k = text.find("\n", j)
                if k == -1:
                    k = n
                if k > 0 and text[k - 1] == "\\":
                    j = k + 1
                    continue
                break
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
            continue
        if text.startswith("//", i):
            k = text.find("\n", i)
            k = n if k == -1 else k
            out.append(" " * (k - i))
            i = k
            continue
        if text.startswith("/*", i):
            k = text.find("*/", i + 2)
            k = n if k == -1 else k + 2
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
            continue
        raw = re.match(r'R"([^()\\ ]{0,16})\(', text[i:i + 20])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = ")" + raw.group(1) + '"'
            k = text.find(end, i + raw.end())
            k = n if k == -1 else k + len(end)
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:k]))
            i = k
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
            line_start = False
            continue
        out.append(c)
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        i += 1
    return "".join(out)


def matching(code, i):
    """The index of the brace that closes the one at i."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


# Parenthesised words in a header that are not the function's name.
ATTRIBUTES = {"__launch_bounds__", "__attribute__", "alignas", "__declspec"}


def strip_template(header):
    """header without a leading template<...> (nested angle brackets included)."""
    m = re.match(r"\s*template\s*<", header)
    if not m:
        return header
    depth, i = 1, m.end()
    while i < len(header) and depth:
        depth += {"<": 1, ">": -1}.get(header[i], 0)
        i += 1
    return strip_template(header[i:])


def functions(text):
    """(first line, name, lines) of every function body in C-family source text."""
    code = blank(text)
    found = []

    def scope(start, end):  # the declarations in code[start:end], a namespace's or a class's
        header_start = start
        i = start
        while i < end:
            c = code[i]
            if c in ";}":
                header_start = i + 1
            elif c == "{":
                header = code[header_start:i]
                close = matching(code, i)
                bare = strip_template(header)
                if re.search(r"\bnamespace\b|\bextern\s*\"\"", bare) or (
                        re.search(r"\b(class|struct|union)\b", bare) and "(" not in bare):
                    scope(i + 1, close)  # its declarations are at this level too
                elif re.search(r"\)[\w\s:&*<>,()\[\]\.\-]*$", bare) and "=" not in bare.split("(")[0] \
                        and not re.search(r"\benum\b", bare):
                    first = header_start + len(header) - len(header.lstrip())
                    line = code.count("\n", 0, first) + 1
                    last = code.count("\n", 0, close) + 1
                    names = [m for m in re.findall(r"([~\w:]+)\s*\(", bare) if m not in ATTRIBUTES]
                    found.append((line, names[0] if names else "?", last - line + 1))
                header_start = close + 1
                i = close
            i += 1

    scope(0, len(code))
    return found


def violations(root):
    found = []
    for path in files(root):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > MAX_FILE and path not in EXEMPT | TEMPORARY:
            found.append(f"{path}: the file is {lines} lines (at most {MAX_FILE}); split it along its ideas")
        if C_FAMILY.search(path) and path not in TEMPORARY:
            for line, name, length in functions(text):
                if length > MAX_FUNCTION:
                    found.append(f"{path}:{line}: {name} is {length} lines (at most {MAX_FUNCTION})")
    return found


def self_test():
    long_body = "".join(f"  x += {i};\n" for i in range(MAX_FUNCTION))
    planted = {
        # a long free function (with a brace in a string and a comment that must not confuse it)
        "train/long.cpp": "// a '{' in a comment\nnamespace a {\nint f(int x) {\n  const char* s = \"{\";\n"
                          + long_body + "  return x;\n}\n}  // namespace a\n",
        # a long method inside a class, and a long table that is no function
        "models/method.h": "#pragma once\nstruct S {\n  template <class T>\n  T g(T x) const {\n" + long_body
                           + "    return x;\n  }\n};\nconst int table[] = {\n" + "  1,\n" * (MAX_FUNCTION + 5) + "};\n",
        # a short function, and lambdas that are part of it: fine
        "train/short.cpp": "void h() {\n  auto l = [] { return 1; };\n  l();\n}\n",
        # a long file of short functions
        "framework/long_file.cpp": "".join(f"int f{i}() {{ return {i}; }}\n" for i in range(MAX_FILE + 1)),
        # tests may be as long as they like
        "tests/t.cpp": "void t() {\n" + long_body * 2 + "}\n",
    }
    expected = ["framework/long_file.cpp: the file is", "models/method.h:3: g is", "train/long.cpp:3: f is"]
    return layout_check.self_test(violations, planted, expected,
                                  "the planted long function, method and file are reported, and nothing else",
                                  key=lambda v: re.sub(r" \d+ lines.*", "", v))


def main():
    return layout_check.main(
        violations, self_test,
        passed=f"every function is at most {MAX_FUNCTION} lines and every file at most {MAX_FILE} "
               f"(except {', '.join(sorted(EXEMPT | TEMPORARY))})",
        failed=lambda n: f"{n} over the limits: a function at most {MAX_FUNCTION} lines, a file at most {MAX_FILE} "
                         f"(tests/layout/check_sizes.py)")


if __name__ == "__main__":
    sys.exit(main())
