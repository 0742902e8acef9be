"""docs/check_rendering.py HTML_DIR: the course site shows no Markdown that Doxygen failed to render.

Run by the `docs` test after Doxygen (docs/CMakeLists.txt), beside check_links.py. In the text a
reader sees (outside code blocks, inline code, scripts and formulas) it looks for what a
Markdown parser should have consumed:
  - a backtick: an inline-code span that did not close (a prime inside backticks, `J'`, once
    broke 13 spans in 8 chapters);
  - `**` or `__` around a word: emphasis left unrendered; a `*` glued to punctuation, as an
    emphasis that opens or closes at inline code leaves it;
  - `](` : a link or image left as text;
  - a `$` pair or `\\(`: a formula MathJax will not typeset (the site's formulas are
    \\f$...\\f$, which Doxygen hands to MathJax).
Also: every formula Doxygen produced is inside MathJax's delimiters, its braces balance, and
every macro and environment it uses is one that the site's MathJax (html/mathjax: the TeX
input with AMSmath and AMSsymbols) defines, so a typo shows here rather than as red text in a
reader's browser. (Every image a page shows is there: check_links.py checks each src.) Prints each problem with its page and the text
around it, and exits 1 if there is any.
"""
import html.parser
import os
import re
import sys

# Elements whose text is code or machinery, not prose.
SKIP_TAGS = {"pre", "code", "script", "style", "tt", "kbd", "samp"}
# Doxygen's own markup for code listings and source pages, and its declarations (a macro's
# definition, BRRR_PROFILE(...)'s __VA_ARGS__, is code, not emphasis).
SKIP_CLASSES = {"fragment", "line", "memItemLeft", "memItemRight", "memname", "mjx-chtml", "MathJax", "MathJax_Preview", "MathJax_Display", "formulaDsp"}

PATTERNS = [
    (re.compile(r"`"), "a stray backtick (an inline-code span that did not render)"),
    (re.compile(r"(?<![\w*])\*\*\S|\S\*\*(?![\w*])"), "'**' left unrendered"),
    (re.compile(r"(?<![\w_])__[A-Za-z]|[A-Za-z]__(?![\w_])"), "'__' left unrendered"),
    # An emphasis that opens or closes at inline code (*`dx`.*) is left as text by Doxygen; the
    # code span drops out of the prose, so the asterisk shows glued to punctuation or a word.
    (re.compile(r"(?<=[.,;:!?)])\*(?=\s|$)|(?:^|\s)\*(?=[.,;:!?(])"), "a '*' left unrendered (emphasis meeting inline code?)"),
    (re.compile(r"\[[^\]\s][^\]]*\]\([^)\s]+\)"), "a Markdown link or image left as text"),
    (re.compile(r"\\f[\$\[\]]"), "a Doxygen formula left as text"),
]


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []  # (tag, skipping) of open elements
        self.text = []   # pieces of prose, with the offset of each in the page

    def skipping(self):
        return bool(self.stack) and self.stack[-1][1]

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "img", "hr", "meta", "link", "input", "area", "col", "wbr"):
            return
        classes = set((dict(attrs).get("class") or "").split())
        skip = self.skipping() or tag in SKIP_TAGS or bool(classes & SKIP_CLASSES)
        self.stack.append((tag, skip))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):  # tolerate unclosed <p> and the like
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        if not self.skipping():
            self.text.append(data)


def mathjax_names(root):
    """The macros and environments the site's MathJax knows, read from its own files."""
    names = set()
    for rel in ("jax/input/TeX/jax.js", "extensions/TeX/AMSmath.js", "extensions/TeX/AMSsymbols.js"):
        with open(os.path.join(root, "mathjax", rel), encoding="utf-8") as f:
            names |= set(re.findall(r"[{,]\s*[\"']?(?:\\\\)*([A-Za-z]+)[\"']?\s*:", f.read()))  # lvert: or "\\lvert":
    return names


def formula_problems(formula, known):
    found = []
    depth = 0
    for m in re.finditer(r"\\[{}]|[{}]", formula):
        if m.group() in ("{", "}"):
            depth += 1 if m.group() == "{" else -1
            if depth < 0:
                break
    if depth != 0:
        found.append(f"unbalanced braces in formula: {formula.strip()}")
    for name in re.findall(r"\\([A-Za-z]+)", formula) + re.findall(r"\\begin\{([A-Za-z*]+)\}", formula):
        if name.rstrip("*") not in known:
            found.append(f"MathJax does not know '{name}' in formula: {formula.strip()}")
    return found


def problems(path, known):
    page = Page()
    with open(path, encoding="utf-8", errors="replace") as f:
        page.feed(f.read())
    prose = " ".join(page.text)
    # Formulas: Doxygen writes them as \( ... \) and \[ ... \] for MathJax to typeset.
    opened, closed = prose.count("\\(") + prose.count("\\["), prose.count("\\)") + prose.count("\\]")
    found = [] if opened == closed else [f"{opened} formulas opened and {closed} closed"]
    for m in re.finditer(r"\\\((.*?)\\\)|\\\[(.*?)\\\]", prose, flags=re.S):
        found += formula_problems(m.group(1) if m.group(1) is not None else m.group(2), known)
    prose = re.sub(r"\\\((.*?)\\\)|\\\[(.*?)\\\]", " ", prose, flags=re.S)
    for pattern, what in PATTERNS:
        for m in pattern.finditer(prose):
            around = prose[max(0, m.start() - 50):m.end() + 50].replace("\n", " ")
            found.append(f"{what}: ...{around}...")
    return found


def main():
    root = sys.argv[1]
    pages = sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f.endswith(".html"))
    known = mathjax_names(root)
    bad = 0
    for path in pages:
        # Source listings (*_source.html) are code from top to bottom.
        if path.endswith("_source.html"):
            continue
        for p in problems(path, known):
            bad += 1
            print(f"{os.path.relpath(path, root)}: {p}")
    print(f"{len(pages)} pages scanned for unrendered Markdown, {bad} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
