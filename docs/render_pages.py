#!/usr/bin/env python3
"""docs/render_pages.py HTML_DIR: every page of the course, rendered by a real browser, shows
what its author wrote.

check_rendering.py reads the HTML Doxygen wrote; a reader sees it after the browser has run the
page's scripts (MathJax typesets the formulas then). This opens each course page (the main
page, the chapters, design, teaching, measurements, the notebooks' README: every page Doxygen
made from a Markdown file) in headless Chromium (Debian's `chromium`), lets its scripts run,
takes the page as the browser holds it (--dump-dom), and checks:
  - every formula was typeset: as many MathJax renderings as formulas, none a MathJax error;
  - the text a reader sees shows no Markdown left unrendered (check_rendering.py's checks,
    run on the rendered page);
  - a chapter's title reads "Chapter NN: Title", as every chapter's does.
Prints each problem with its page and exits 1 if there is one; exits 77 (ctest's skip) when
there is no Chromium, saying so.
"""
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_rendering  # noqa: E402

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def course_pages(root):
    """The pages made from Markdown: index.html (README.md) and md_*.html."""
    return sorted(os.path.join(root, f) for f in os.listdir(root)
                  if f == "index.html" or (f.startswith("md_") and f.endswith(".html")))


def render(browser, path):
    """The page as the browser holds it after its scripts ran (at most 30 s of page time)."""
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", f"--user-data-dir={profile}", "--virtual-time-budget=30000", "--dump-dom",
             "file://" + os.path.abspath(path)],
            capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or "</html>" not in done.stdout:
        raise RuntimeError(f"{browser} could not render it (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    return done.stdout


def problems(rendered, known):
    found = []
    formulas = len(re.findall(r'<script type="math/tex', rendered))
    typeset = len(re.findall(r'id="MathJax-Element-\d+-Frame"', rendered))
    if typeset != formulas:
        found.append(f"{formulas} formulas but {typeset} typeset by MathJax (did MathJax load and finish?)")
    for m in re.finditer(r'class="merror"|Math Processing Error', rendered):
        found.append("MathJax shows an error: ..." + re.sub(r"<[^>]+>", "", rendered[m.start():m.start() + 400])[:120])
    with tempfile.NamedTemporaryFile("w", suffix=".html", delete=False, encoding="utf-8") as f:
        f.write(rendered)
    try:
        found += check_rendering.problems(f.name, known)
    finally:
        os.unlink(f.name)
    title = re.search(r'<div class="title">(.*?)</div>', rendered, flags=re.S)
    title = re.sub(r"<[^>]+>", "", title.group(1)).strip() if title else ""
    if title.startswith("Chapter") and not re.match(r"Chapter \d\d: \S", title):
        found.append(f"the title '{title}' is not written 'Chapter NN: Title' as the other chapters' are")
    return found


def main():
    root = sys.argv[1]
    browser = next((b for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        print("skipped: no Chromium to render the pages with (Debian: apt-get install chromium; scripts/setup.sh)")
        return 77
    known = check_rendering.mathjax_names(root)
    pages = course_pages(root)
    bad = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for path, rendered in zip(pages, pool.map(lambda p: render(browser, p), pages)):
            for p in problems(rendered, known):
                bad += 1
                print(f"{os.path.basename(path)}: {p}")
    print(f"{len(pages)} course pages rendered in headless {browser}, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
