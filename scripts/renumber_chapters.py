#!/usr/bin/env python3
"""scripts/renumber_chapters.py: gives the chapter written under the provisional number XX its
place in the course, and shifts every later chapter by one, everywhere.

    scripts/renumber_chapters.py 09          # XX becomes 09; 09, 10, ... become 10, 11, ...
    scripts/renumber_chapters.py 09 --dry-run

Purely mechanical, and safe to run again after a merge that added chapters (it reads the
chapter list from docs/chapters/): it renames docs/chapters/NN-*.md, notebooks/NN-*.ipynb and
docs/images/chNN-*.png, then rewrites, in every tracked text file,
  - the chapters' file names and notebook names ("09-gpu-emulator" -> "10-gpu-emulator");
  - "chapter NN" / "Chapters NN-MM" / "chapters NN, MM and KK" (any case), "ch. NN", "[ch. NN";
  - the kernel lab's `chapter = "NN"` and the emulator tests' check_chapter("NN");
  - the exercises' ids (ex12.2: chapter 12's second) everywhere, and the exercise tables:
    exercises/grader.cpp's chapter ints, docs/teaching.md's rows and its sample output; the
    README's course table; lab/cases_*'s list in chapter 10's table;
  - the placeholder XX in those same places (and the exercise's 99 in exercises/grader.cpp).
Then it fails if an "XX" placeholder is left anywhere.
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    dry = "--dry-run" in sys.argv
    if len(args) != 1 or not re.fullmatch(r"\d\d", args[0]):
        sys.exit("usage: scripts/renumber_chapters.py NN [--dry-run]   (NN: the new chapter's number, e.g. 09)")
    place = int(args[0])
    chapters = sorted((ROOT / "docs/chapters").glob("[0-9][0-9]-*.md"))
    provisional = list((ROOT / "docs/chapters").glob("XX-*.md"))
    if len(provisional) != 1:
        sys.exit(f"expected one docs/chapters/XX-*.md, found {len(provisional)}")
    new_slug = provisional[0].stem[3:]

    def shift(n):
        return n + 1 if n >= place else n

    # Old slug -> new slug, e.g. "09-gpu-emulator" -> "10-gpu-emulator", and "XX-convolutions".
    slugs = {}
    for path in chapters:
        n, rest = int(path.stem[:2]), path.stem[3:]
        if n >= place:
            slugs[path.stem] = f"{shift(n):02d}-{rest}"
    slugs[f"XX-{new_slug}"] = f"{place:02d}-{new_slug}"
    print("chapters:", ", ".join(f"{a} -> {b}" for a, b in slugs.items()))

    def num(m_text):  # "09" -> "10"; "XX" -> the new place
        return f"{place:02d}" if m_text == "XX" else f"{shift(int(m_text)):02d}"

    slug_re = re.compile("|".join(re.escape(s) for s in sorted(slugs, key=len, reverse=True)))
    image_re = re.compile(r"\bch(\d\d|XX)-")
    nn = r"(?:\d\d|XX)"
    chapter_re = re.compile(r"(?i)\b(chapters?\s+)(" + nn + r"(?:(?:\s*(?:,|-|–|\band\b|\bor\b|\bto\b)\s*)" + nn + r")*)")
    ch_abbrev_re = re.compile(r"\b(ch\.\s*)(" + nn + r"(?:(?:,\s*)" + nn + r")*)")
    field_re = re.compile(r'((?:\bchapter\s*=\s*|check_chapter\()")(' + nn + r')(")')
    two = re.compile(r"\d\d|XX")

    def renum_all(text):
        return two.sub(lambda m: num(m.group(0)), text)

    def rewrite(path, text):
        text = slug_re.sub(lambda m: slugs[m.group(0)], text)
        text = image_re.sub(lambda m: f"ch{num(m.group(1))}-", text)
        text = chapter_re.sub(lambda m: m.group(1) + renum_all(m.group(2)), text)
        text = ch_abbrev_re.sub(lambda m: m.group(1) + renum_all(m.group(2)), text)
        text = field_re.sub(lambda m: m.group(1) + num(m.group(2)) + m.group(3), text)
        rel = path.relative_to(ROOT).as_posix()
        # An exercise's id is its chapter and place: ex12.2 -> ex13.2; exXX.1 -> the new place.
        text = re.sub(r"\bex(\d\d|XX)\.(\d+)\b", lambda m: f"ex{num(m.group(1))}.{m.group(2)}", text)
        if rel == "exercises/grader.cpp":  # {"ex12.1", "gelu_forward", 12, ...}, then a placeholder's 99
            text = re.sub(r'(\{"ex\d\d\.\d+", "\w+", )(\d+)(?=,)', lambda m: m.group(1) + str(shift(int(m.group(2)))),
                          text)
            text = re.sub(r'(\{"ex\d\d\.\d+", "\w+", )99 /\* chapter (?:XX|\d\d): scripts/renumber_chapters.py sets it \*/',
                          lambda m: m.group(1) + str(place), text)
        if rel == "docs/teaching.md":  # | ex12.1 | gelu_forward | 12 | ... and the sample output
            text = re.sub(r"^(\| ex\d\d\.\d+ \| \w+ \| )(\d\d|XX)( \|)",
                          lambda m: m.group(1) + num(m.group(2)) + m.group(3), text, flags=re.M)
            text = re.sub(r"^(ex\d\d\.\d+ \w+\s+)(\d\d)(\s+(?:cpu|cuda)\b)",
                          lambda m: m.group(1) + num(m.group(2)) + m.group(3), text, flags=re.M)
        if rel == "README.md":  # the course table: | 09 | [The GPU ...
            text = re.sub(r"^\| (\d\d|XX) \| \[", lambda m: f"| {num(m.group(1))} | [", text, flags=re.M)
        if rel.startswith("docs/chapters/") and "roofline-kernel-lab" in rel:  # `nn` (07, 16) ...
            text = re.sub(r"^(\| `lab/cases_\*\.cpp` \|.*)$", lambda m: re.sub(
                r"\((\d\d|XX)((?:, (?:\d\d|XX))*)\)", lambda p: "(" + renum_all(p.group(1) + p.group(2)) + ")",
                m.group(1)), text, flags=re.M)
        return text

    # 1. Rename, highest number first so no name is taken twice.
    renames = []
    for folder, suffix in (("docs/chapters", ".md"), ("notebooks", ".ipynb")):
        for old, new in slugs.items():
            src = ROOT / folder / (old + suffix)
            if src.exists():
                renames.append((src, ROOT / folder / (new + suffix)))
    for png in (ROOT / "docs/images").glob("ch*-*.png"):
        m = re.match(r"ch(\d\d|XX)-(.*)", png.name)
        if m and (m.group(1) == "XX" or int(m.group(1)) >= place):
            renames.append((png, png.with_name(f"ch{num(m.group(1))}-{m.group(2)}")))
    renames.sort(key=lambda r: (r[0].name[:2] != "XX" and r[0].name[:4] != "chXX", r[0].name), reverse=True)
    for src, dst in renames:
        print(f"git mv {src.relative_to(ROOT)} {dst.relative_to(ROOT)}")
        if not dry:
            git("mv", str(src.relative_to(ROOT)), str(dst.relative_to(ROOT)))

    # 2. Rewrite every tracked text file.
    changed = 0
    for rel in git("ls-files").splitlines():
        path = ROOT / rel
        if path.suffix in (".png", ".gz") or not path.is_file() or rel == "scripts/renumber_chapters.py":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite(path, text)
        if new != text:
            changed += 1
            print("rewrote", rel)
            if not dry:
                path.write_text(new, encoding="utf-8")

    # 3. No placeholder may survive.
    if not dry:
        left = subprocess.run(["git", "grep", "-I", "-n", "-E", r"\bXX\b|chXX|XX-"], cwd=ROOT, capture_output=True, text=True)
        left_lines = [l for l in left.stdout.splitlines() if not l.startswith("scripts/renumber_chapters.py")]
        if left_lines:
            sys.exit("placeholders left:\n" + "\n".join(left_lines))
    print(f"{len(renames)} files renamed, {changed} files rewritten")


if __name__ == "__main__":
    main()
