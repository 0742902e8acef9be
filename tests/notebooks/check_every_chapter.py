#!/usr/bin/env python3
"""tests/notebooks/check_every_chapter.py ROOT: every chapter has its notebook.

Each docs/chapters/NN-name.md has notebooks/NN-name.ipynb beside it (the same stem), whose first
cell names the chapter, and notebooks/README.md lists it in its table; and there is no notebook
without its chapter. Prints what is missing and exits 1 if anything is. `--self-test` checks,
on a scratch tree, that a chapter without a notebook is reported.
"""
import json
import os
import sys
import tempfile


def problems(root):
    chapters = sorted(f[:-3] for f in os.listdir(os.path.join(root, "docs", "chapters")) if f.endswith(".md"))
    notebooks = sorted(f[:-6] for f in os.listdir(os.path.join(root, "notebooks")) if f.endswith(".ipynb"))
    readme_path = os.path.join(root, "notebooks", "README.md")
    readme = open(readme_path, encoding="utf-8").read() if os.path.exists(readme_path) else ""
    found = []
    for stem in chapters:
        if stem not in notebooks:
            found.append(f"docs/chapters/{stem}.md has no notebook: write notebooks/{stem}.ipynb "
                         f"(notebooks/README.md says how they work)")
            continue
        with open(os.path.join(root, "notebooks", stem + ".ipynb"), encoding="utf-8") as f:
            cells = json.load(f)["cells"]
        first = "".join(cells[0]["source"]) if cells else ""
        if f"Chapter {stem[:2]}" not in first:
            found.append(f"notebooks/{stem}.ipynb: its first cell does not name 'Chapter {stem[:2]}'")
        if f"`{stem}.ipynb`" not in readme:
            found.append(f"notebooks/README.md: its table has no row for `{stem}.ipynb`")
    for stem in notebooks:
        if stem not in chapters:
            found.append(f"notebooks/{stem}.ipynb has no chapter docs/chapters/{stem}.md")
    return chapters, found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs", "chapters"))
        os.makedirs(os.path.join(root, "notebooks"))
        for stem in ("01-a", "02-b"):
            open(os.path.join(root, "docs", "chapters", stem + ".md"), "w").write("# Chapter\n")
        cell = {"cell_type": "markdown", "metadata": {}, "source": ["# Chapter 01: A"]}
        json.dump({"cells": [cell]}, open(os.path.join(root, "notebooks", "01-a.ipynb"), "w"))
        open(os.path.join(root, "notebooks", "README.md"), "w").write("| `01-a.ipynb` | a |\n")
        _, found = problems(root)
    ok = len(found) == 1 and found[0].startswith("docs/chapters/02-b.md has no notebook")
    print("\n".join(found))
    print("self-test: " + ("a chapter without a notebook is reported" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    chapters, found = problems(sys.argv[1])
    for p in found:
        print(p)
    print(f"{len(chapters)} chapters, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
